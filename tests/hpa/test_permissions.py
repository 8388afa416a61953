"""The HPA floor's RBAC manifest and code: exactly the declared rules, and a pure planner."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor import permissions

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "rbac-hpa-floor.yaml"
PURE = ("model", "planner", "results", "settings", "reading", "report")
FORBIDDEN = ("kubernetes", "google", "flask", "functions_framework", "requests", "urllib3")


def _documents() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc}


def test_the_rbac_manifest_grants_exactly_the_rules_the_code_declares() -> None:
    documents = _documents()
    granted = sorted(
        (kind == "Role", group, resource, tuple(rule.get("resourceNames", ())), tuple(sorted(rule["verbs"])))
        for kind in ("ClusterRole", "Role")
        for rule in documents[kind]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    )
    declared = sorted(
        (rule.lease_namespace, rule.api_group, rule.resource, rule.resource_names, tuple(sorted(rule.verbs)))
        for rule in permissions.HPA_FLOOR_RBAC_RULES
    )
    assert granted == declared
    for kind in ("ClusterRole", "Role"):
        assert all(
            set(rule) <= {"apiGroups", "resources", "resourceNames", "verbs"} for rule in documents[kind]["rules"]
        )
    assert "*" not in MANIFEST.read_text().split("apiVersion", 1)[1]


def test_the_rbac_manifest_binds_its_own_roles_to_the_function_account_placeholder() -> None:
    documents = _documents()
    subjects = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "FUNCTION_SERVICE_ACCOUNT_EMAIL"}]
    binding = documents["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == documents["ClusterRole"]["metadata"]["name"] == "node-compactor-hpa-floor"
    assert binding["subjects"] == subjects
    lease_binding = documents["RoleBinding"]
    assert lease_binding["roleRef"]["name"] == documents["Role"]["metadata"]["name"] == "node-compactor-hpa-floor-lease"
    assert lease_binding["subjects"] == subjects


def test_the_job_writes_only_what_rbac_grants_it() -> None:
    # The calls the adapter makes, each with the rule that allows it.
    source = (ROOT / "compactor" / "hpa" / "cluster.py").read_text()
    for call, rule in [
        ("list_horizontal_pod_autoscaler_for_all_namespaces", ("autoscaling", "horizontalpodautoscalers", "list")),
        ("patch_namespaced_horizontal_pod_autoscaler", ("autoscaling", "horizontalpodautoscalers", "patch")),
        ("list_replica_set_for_all_namespaces", ("apps", "replicasets", "list")),
    ]:
        assert call in source
        group, resource, verb = rule
        assert any(
            r.api_group == group and r.resource == resource and verb in r.verbs
            for r in permissions.HPA_FLOOR_RBAC_RULES
        ), f"{call} needs {rule}"


@pytest.mark.parametrize("module", PURE)
def test_the_planner_side_imports_no_io_library(module: str) -> None:
    tree = ast.parse((ROOT / "compactor" / "hpa" / f"{module}.py").read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    bad = sorted(name for name in imported if name.split(".")[0] in FORBIDDEN)
    assert not bad, f"compactor/hpa/{module}.py imports {bad}"


def test_importing_the_planner_loads_no_io_library_even_indirectly() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import compactor.hpa.planner\n"
        f"bad = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == ""
