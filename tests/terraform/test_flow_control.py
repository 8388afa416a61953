"""deploy/flowcontrol.yaml, the optional API Priority and Fairness objects for the function's identity,
and how Terraform offers them: off by default, filled in with each cluster's account when on.

What the schema covers is checked against `compactor.permissions`, never copied: every request the
functions may make (and the watch of a streaming list) falls into the schema, and nothing else.
That kube-apiserver accepts the objects and classifies the identity's requests with them is
tests/e2e/test_api_cost.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from compactor import permissions
from tests.terraform.test_terraform_module import MODULE, RBAC_PLACEHOLDER, REPO_ROOT, ROOT, expression

FLOW_CONTROL_MANIFEST = REPO_ROOT / "deploy" / "flowcontrol.yaml"
# Streaming lists (COMPACTOR_LIST_METHOD=watch-list) watch what the reader lists.
WATCHED = {("", "nodes"), ("", "pods"), ("policy", "poddisruptionbudgets")}
# The suggested FlowSchemas of kube-apiserver: the system ones come at or below 1600 (system-nodes 500,
# kube-controller-manager and kube-scheduler 800, kube-system-service-accounts 900, probes 2 ...),
# service-accounts at 9000, global-default at 9900.
LAST_SYSTEM_PRECEDENCE = 1600
SERVICE_ACCOUNTS_PRECEDENCE = 9000


def documents(path: Path = FLOW_CONTROL_MANIFEST) -> dict[str, dict[str, Any]]:
    return {document["kind"]: document for document in yaml.safe_load_all(path.read_text()) if document}


def function_requests() -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every request the compactor and HPA floor functions may make."""
    rules = (
        *permissions.RBAC_RULES,
        *permissions.SURGE_RBAC_RULES,
        *permissions.PLACEHOLDER_RBAC_RULES,
        *permissions.HPA_FLOOR_RBAC_RULES,
    )
    found = {(rule.api_group, rule.resource, verb) for rule in rules for verb in rule.verbs}
    return found | {(group, resource, "watch") for group, resource in WATCHED}


def test_the_flow_schema_sends_the_functions_identity_to_its_own_priority_level() -> None:
    found = documents()
    assert set(found) == {"PriorityLevelConfiguration", "FlowSchema"}
    level, schema = found["PriorityLevelConfiguration"], found["FlowSchema"]
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == level["metadata"]["name"] == "node-compactor"
    assert all(doc["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1" for doc in found.values())
    (rule,) = schema["spec"]["rules"]
    assert rule["subjects"] == [{"kind": "User", "user": {"name": RBAC_PLACEHOLDER}}]
    assert "nonResourceRules" not in rule


def test_the_schema_comes_after_the_system_schemas_and_before_service_accounts_and_global_default() -> None:
    precedence = documents()["FlowSchema"]["spec"]["matchingPrecedence"]
    assert LAST_SYSTEM_PRECEDENCE < precedence < SERVICE_ACCOUNTS_PRECEDENCE


def test_the_priority_level_queues_instead_of_rejecting_and_lends_what_it_does_not_use() -> None:
    limited = documents()["PriorityLevelConfiguration"]["spec"]["limited"]
    assert documents()["PriorityLevelConfiguration"]["spec"]["type"] == "Limited"
    assert limited["limitResponse"]["type"] == "Queue"
    assert 0 < limited["nominalConcurrencyShares"] < 20, "less than global-default's 20: a run is one client"
    assert 0 < limited["lendablePercent"] <= 100


def test_the_schema_covers_exactly_the_requests_the_functions_make() -> None:
    (rule,) = documents()["FlowSchema"]["spec"]["rules"]
    covered = {
        (group, resource, verb)
        for resource_rule in rule["resourceRules"]
        for group in resource_rule["apiGroups"]
        for resource in resource_rule["resources"]
        for verb in resource_rule["verbs"]
    }
    needed = function_requests()
    assert needed <= covered, f"requests the schema misses: {sorted(needed - covered)}"
    groups = {group for group, _, _ in needed}
    resources = {resource for _, resource, _ in needed}
    verbs = {verb for _, _, verb in needed}
    assert {(g, r, v) for g, r, v in covered} <= {(g, r, v) for g in groups for r in resources for v in verbs}
    assert {resource for _, resource, _ in covered} == resources, "no resource the functions never touch"
    assert all(resource_rule["clusterScope"] for resource_rule in rule["resourceRules"]), "nodes are cluster-scoped"


def test_flow_control_is_off_by_default_and_each_cluster_may_turn_it_on() -> None:
    variable = MODULE.variables()["flow_control_enabled"]
    assert variable["default"] is False and variable["nullable"] is False
    assert "429" in variable["description"], "the description says when to turn it on"
    assert expression(ROOT.module_calls()["cluster"]["flow_control_enabled"]) == (
        "try(each.value.flow_control_enabled, null)"
    )
    conditions = [expression(check["condition"]) for check in ROOT.variables()["clusters"]["validation"]]
    assert any('"surge_single_replicas", "flow_control_enabled"' in condition for condition in conditions)


def test_the_manifest_is_filled_in_with_each_clusters_account_where_it_is_on() -> None:
    assert ROOT.local("flow_control_template") == '${file("${path.module}/../deploy/flowcontrol.yaml")}'
    rendered = expression(ROOT.outputs()["flow_control_manifests"]["value"])
    assert (
        "replace(local.flow_control_template, local.rbac_placeholder, deployment.function_service_account_email)"
        in rendered
    )
    assert "if deployment.flow_control_enabled" in rendered
    assert expression(MODULE.outputs()["flow_control_enabled"]["value"]) == "var.flow_control_enabled"
