"""The Terraform's wiring, read from its HCL: who may call the functions, what
they may do, what they are built from, what waits for what, and how the root
module in terraform/ shares one set of resources between the clusters it
deploys with modules/node-compactor.

Terraform itself cannot plan here (no providers), so these tests parse the
files with python-hcl2 and check the expressions that carry each promise.
The permission lists are imported from `compactor.permissions`, never copied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml
from hcl2.utils import SerializationOptions

from compactor import permissions
from compactor.gcp import gke

REPO_ROOT = Path(__file__).resolve().parents[2]
ROOT_DIR = REPO_ROOT / "terraform"
MODULE_DIR = ROOT_DIR / "modules" / "node-compactor"
RBAC_MANIFEST = REPO_ROOT / "deploy" / "rbac.yaml"
HPA_FLOOR_RBAC_MANIFEST = REPO_ROOT / "deploy" / "rbac-hpa-floor.yaml"
SURGE_RBAC_MANIFEST = REPO_ROOT / "deploy" / "rbac-surge.yaml"
REPLACEMENT_MANIFEST = REPO_ROOT / "deploy" / "replacement.yaml"

# Plain dicts without block markers; string literals without their quotes.
# Expressions keep their "${...}" wrapper.
HCL_OPTIONS = SerializationOptions(explicit_blocks=False, strip_string_quotes=True, with_comments=False)

RBAC_PLACEHOLDER = "FUNCTION_SERVICE_ACCOUNT_EMAIL"
PUBLIC_PRINCIPALS = ("allUsers", "allAuthenticatedUsers")
METRICS = (
    "runs",
    "drains-started",
    "drains-completed",
    "rollbacks",
    "failed-runs",
    "nodes-awaiting-removal",
    "cluster-price-per-hour",
    "savings-per-hour",
)

# Inputs the root module sets once for every cluster; every other module input
# is a cluster's own setting, read from var.clusters.
SHARED_INPUTS = {
    "project_id",
    "region",
    "runtime",
    "source_archive",
    "docker_repository",
    "build_service_account",
    "custom_roles",
    "log_metric_types",
    "firestore_database",
}


# --- reading the HCL ----------------------------------------------------------


@dataclass(frozen=True)
class Terraform:
    """The blocks of one Terraform module directory (its own *.tf files only)."""

    directory: Path
    blocks: dict[str, list[dict[str, Any]]]

    @classmethod
    def parse(cls, directory: Path) -> Terraform:
        blocks: dict[str, list[dict[str, Any]]] = {}
        for path in sorted(directory.glob("*.tf")):
            parsed = hcl2.loads(path.read_text(), serialization_options=HCL_OPTIONS)
            for block_type, found in parsed.items():
                blocks.setdefault(block_type, []).extend(found)
        return cls(directory, blocks)

    def _merged(self, block_type: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for block in self.blocks.get(block_type, []):
            merged.update(block)
        return merged

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """Every resource of one type, by name."""
        found: dict[str, dict[str, Any]] = {}
        for block in self.blocks.get("resource", []):
            for declared_type, by_name in block.items():
                if declared_type == resource_type:
                    found.update(by_name)
        return found

    def resource(self, resource_type: str, name: str) -> dict[str, Any]:
        declared = self.resources(resource_type)
        assert name in declared, f"{self.directory.name}/ declares no {resource_type}.{name}"
        return declared[name]

    def all_resources(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for block in self.blocks.get("resource", []):
            for resource_type, by_name in block.items():
                for name, body in by_name.items():
                    yield resource_type, name, body

    def local(self, name: str) -> Any:
        declared = self._merged("locals")
        assert name in declared, f"{self.directory.name}/ declares no local.{name}"
        return declared[name]

    def variables(self) -> dict[str, dict[str, Any]]:
        return self._merged("variable")

    def variable_default(self, name: str) -> Any:
        return self.variables()[name]["default"]

    def outputs(self) -> dict[str, dict[str, Any]]:
        return self._merged("output")

    def module_calls(self) -> dict[str, dict[str, Any]]:
        return self._merged("module")


ROOT = Terraform.parse(ROOT_DIR)
MODULE = Terraform.parse(MODULE_DIR)
CALL = ROOT.module_calls()["cluster"]


def expression(value: Any) -> str:
    """The HCL expression inside a "${...}" wrapper, or the value as text."""
    text = str(value)
    if text.startswith("${") and text.endswith("}"):
        return text[2:-1]
    return text


def nested(body: dict[str, Any], *path: str) -> Any:
    """Follow nested blocks, each of which python-hcl2 gives as a one-item list."""
    value: Any = body
    for key in path:
        assert isinstance(value, dict), f"{key!r} is looked up in a block"
        assert key in value, f"missing block or attribute {key!r}"
        value = value[key]
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            value = value[0]
    return value


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def references(text: str) -> set[str]:
    """The variables, locals and resource attributes an expression names."""
    return set(re.findall(r"\b(?:var|local|google_[a-z0-9_]+)\.[A-Za-z0-9_.\[\]]+", text))


def compactor_function() -> dict[str, Any]:
    return MODULE.resource("google_cloudfunctions2_function", "compactor")


def hpa_floor_function() -> dict[str, Any]:
    return MODULE.resource("google_cloudfunctions2_function", "hpa_floor")


# --- the module and how the root calls it -------------------------------------


def test_the_module_configures_no_provider_so_it_can_be_called_with_for_each() -> None:
    assert "provider" not in MODULE.blocks
    assert [list(block) for block in ROOT.blocks["provider"]] == [["google"]]
    assert CALL["source"] == "./modules/node-compactor"
    assert expression(CALL["for_each"]) == "local.clusters"


def test_the_root_passes_every_module_input_and_no_other() -> None:
    arguments = set(CALL) - {"source", "for_each", "depends_on"}
    assert arguments == set(MODULE.variables())


def test_shared_inputs_come_from_resources_the_root_creates_once() -> None:
    for name in SHARED_INPUTS - {"custom_roles"}:
        assert "each." not in str(CALL[name]), name
    assert expression(CALL["source_archive"]) == "local.source_archive"
    assert expression(ROOT.local("source_archive")["object"]) == "google_storage_bucket_object.source.name"
    assert expression(CALL["docker_repository"]) == "google_artifact_registry_repository.images.id"
    # Shared by the clusters of one project: a custom role is granted only in its own project.
    assert expression(CALL["custom_roles"]) == "local.custom_roles_by_project[each.value.cluster.project]"


def _cluster_settings() -> set[str]:
    return set(MODULE.variables()) - SHARED_INPUTS


def test_each_cluster_setting_is_read_from_its_entry_and_absent_means_the_module_default() -> None:
    for name in _cluster_settings() - {"name", "cluster", "config"}:
        assert expression(CALL[name]) == f"try(each.value.{name}, null)", name
        variable = MODULE.variables()[name]
        assert "default" in variable, f"{name} has no default for an absent setting"
        if variable["default"] is not None:
            assert variable.get("nullable") is False, f"null for {name} must mean its default"
    assert expression(CALL["cluster"]) == "each.value.cluster"
    assert expression(CALL["config"]) == "each.value.config"
    assert expression(CALL["name"]) == "each.value.name"


def test_a_cluster_entry_may_hold_exactly_the_module_settings_so_a_typo_is_refused() -> None:
    validations = ROOT.variables()["clusters"]["validation"]
    key_check = [v for v in validations if "setsubtract" in str(v["condition"])]
    assert len(key_check) == 1
    allowed = set(re.findall(r'"([a-z_]+)"', expression(key_check[0]["condition"])))
    assert allowed == _cluster_settings()


def test_a_cluster_without_a_name_is_named_after_its_key() -> None:
    clusters = expression(ROOT.local("clusters"))
    assert "for key, settings in var.clusters" in clusters
    assert '"nc-${key}"' in clusters


@pytest.mark.parametrize("terraform", [pytest.param(ROOT, id="root"), pytest.param(MODULE, id="module")])
def test_every_variable_has_a_type_and_a_description(terraform: Terraform) -> None:
    for name, variable in terraform.variables().items():
        assert variable.get("type"), f"variable {name} has no type"
        assert str(variable.get("description", "")).strip(), f"variable {name} has no description"


@pytest.mark.parametrize("terraform", [pytest.param(ROOT, id="root"), pytest.param(MODULE, id="module")])
def test_every_output_has_a_description(terraform: Terraform) -> None:
    for name, output in terraform.outputs().items():
        assert str(output.get("description", "")).strip(), f"output {name} has no description"


def test_the_module_readme_documents_every_input_and_output() -> None:
    readme = (MODULE_DIR / "README.md").read_text()
    for name in [*MODULE.variables(), *MODULE.outputs()]:
        assert f"`{name}`" in readme, f"modules/node-compactor/README.md does not document {name}"


def test_the_module_and_the_root_require_the_providers_they_use() -> None:
    module_providers = MODULE.blocks["terraform"][0]["required_providers"][0]
    root_providers = ROOT.blocks["terraform"][0]["required_providers"][0]
    assert set(module_providers) == {"google"}
    assert set(root_providers) == {"google", "archive", "time"}
    assert module_providers["google"]["version"] == root_providers["google"]["version"]
    assert "time_sleep" in {resource_type for resource_type, _, _ in ROOT.all_resources()}


# --- who may call the functions ------------------------------------------------


def test_scheduler_calls_the_function_with_an_oidc_token_of_its_own_account() -> None:
    job = MODULE.resource("google_cloud_scheduler_job", "compactor")
    target = nested(job, "http_target")
    token = nested(target, "oidc_token")

    assert target["http_method"] == "POST"
    assert expression(target["uri"]) == "local.function_url"
    assert expression(token["audience"]) == "local.function_url"
    assert expression(token["service_account_email"]) == "google_service_account.scheduler.email"
    assert "google_cloudfunctions2_function.compactor.service_config[0].uri" in expression(MODULE.local("function_url"))
    assert "oauth_token" not in target


def test_scheduler_account_is_not_a_function_account() -> None:
    scheduler = MODULE.resource("google_service_account", "scheduler")
    function = MODULE.resource("google_service_account", "function")
    hpa_floor = MODULE.resource("google_service_account", "hpa_floor")

    assert len({scheduler["account_id"], function["account_id"], hpa_floor["account_id"]}) == 3
    assert expression(nested(compactor_function(), "service_config")["service_account_email"]) == (
        "google_service_account.function.email"
    )
    assert expression(nested(hpa_floor_function(), "service_config")["service_account_email"]) == (
        "google_service_account.hpa_floor[0].email"
    )


def test_only_the_scheduler_account_and_the_listed_members_may_invoke_the_functions() -> None:
    invoker_grants = [
        (resource_type, name, body)
        for resource_type, name, body in [*MODULE.all_resources(), *ROOT.all_resources()]
        if "invoker" in str(body.get("role", "")) or resource_type.endswith("_iam_policy")
    ]
    assert sorted((t, n) for t, n, _ in invoker_grants) == [
        ("google_cloud_run_service_iam_member", "hpa_floor_invoker"),
        ("google_cloud_run_service_iam_member", "invoker"),
    ]
    services = {
        name: expression(grant["service"]) for _, name, grant in invoker_grants if grant["role"] == "roles/run.invoker"
    }
    assert services == {
        "invoker": "google_cloudfunctions2_function.compactor.name",
        "hpa_floor_invoker": "google_cloudfunctions2_function.hpa_floor[0].name",
    }
    for _, _, grant in invoker_grants:
        assert "local.invokers" in expression(grant["for_each"])
        assert expression(grant["member"]) == "each.value"
    assert references(expression(MODULE.local("invokers"))) == {
        "google_service_account.scheduler.member",
        "var.invoker_members",
    }


def _invoker_member_pattern() -> str:
    validation = nested(MODULE.variables()["invoker_members"], "validation")
    found = re.search(r'regex\("((?:[^"\\]|\\.)*)"', expression(validation["condition"]))
    assert found, "invoker_members is validated by a regex"
    # The regex sits inside an HCL string literal within the expression.
    return found.group(1).replace("\\\\", "\\")


@pytest.mark.parametrize(
    ("member", "allowed"),
    [
        pytest.param("user:alice@example.com", True, id="user"),
        pytest.param("group:platform@example.com", True, id="group"),
        pytest.param("serviceAccount:ci@p.iam.gserviceaccount.com", True, id="service-account"),
        pytest.param("allUsers", False, id="all-users"),
        pytest.param("allAuthenticatedUsers", False, id="all-authenticated-users"),
        pytest.param("domain:example.com", False, id="whole-domain"),
        pytest.param("user:allUsers", False, id="not-an-email"),
    ],
)
def test_manual_invokers_must_be_named_people_groups_or_service_accounts(member: str, allowed: bool) -> None:
    assert (re.fullmatch(_invoker_member_pattern(), member) is not None) is allowed


def test_nothing_is_granted_to_the_public() -> None:
    # Variables may name the public principals in their validation messages.
    for terraform in (ROOT, MODULE):
        granting_blocks = {key: value for key, value in terraform.blocks.items() if key != "variable"}
        for text in strings_in(granting_blocks):
            for principal in PUBLIC_PRINCIPALS:
                assert principal not in text

    for manifest in (RBAC_MANIFEST, REPLACEMENT_MANIFEST):
        for document in yaml.safe_load_all(manifest.read_text()):
            for subject in document.get("subjects", []):
                assert not subject["name"].startswith("system:"), subject


def test_the_dry_run_commands_call_the_function_urls_with_an_identity_token() -> None:
    for name, url in (
        ("dry_run_command", "local.function_url"),
        ("hpa_floor_dry_run_command", "local.hpa_floor_function_url"),
    ):
        # The hpa floor's command sits in a conditional, its quotes escaped.
        command = MODULE.local(name).replace('\\"', '"')
        assert 'curl -H "Authorization: Bearer $(gcloud auth print-identity-token)" ' in command
        assert f'"${{{url}}}?dryRun=true"' in command
        assert expression(MODULE.outputs()[name]["value"]) == f"local.{name}"


def test_a_single_cluster_still_gets_one_dry_run_command_output() -> None:
    single = expression(ROOT.outputs()["dry_run_command"]["value"])
    assert single == "length(local.deployments) == 1 ? one(values(local.deployments)).dry_run_command : null"


# --- what the functions may do -------------------------------------------------


def test_the_custom_roles_list_exactly_the_permissions_the_code_declares() -> None:
    assert ROOT.local("iam_permissions") == list(permissions.IAM_PERMISSIONS)
    assert ROOT.local("surge_iam_permissions") == list(permissions.SURGE_IAM_PERMISSIONS)
    assert ROOT.local("firestore_iam_permissions") == list(permissions.FIRESTORE_IAM_PERMISSIONS)
    assert ROOT.local("hpa_floor_iam_permissions") == list(permissions.HPA_FLOOR_IAM_PERMISSIONS)
    assert ROOT.local("prometheus_iam_permissions") == list(permissions.PROMETHEUS_IAM_PERMISSIONS)
    definitions = ROOT.local("custom_role_definitions")
    assert {key: expression(role["permissions"]) for key, role in definitions.items()} == {
        "cluster": "local.iam_permissions",
        "surge": "local.surge_iam_permissions",
        "firestore": "local.firestore_iam_permissions",
        "hpa_floor": "local.hpa_floor_iam_permissions",
        "prometheus": "local.prometheus_iam_permissions",
    }


def test_the_custom_roles_are_created_once_per_project_in_the_root_not_per_cluster() -> None:
    assert MODULE.resources("google_project_iam_custom_role") == {}
    home = ROOT.resource("google_project_iam_custom_role", "shared")
    assert "local.custom_role_definitions" in expression(home["for_each"])
    assert 'contains(keys(local.custom_roles_needed), "${var.project_id}/${key}")' in expression(home["for_each"])
    assert expression(home["project"]) == "var.project_id"
    assert expression(home["permissions"]) == "each.value.permissions"
    assert expression(home["role_id"]) == "local.custom_role_id[each.key]"
    elsewhere = ROOT.resource("google_project_iam_custom_role", "cluster_project")
    assert "grant.project != var.project_id" in expression(elsewhere["for_each"])
    assert expression(elsewhere["project"]) == "each.value.project"
    assert expression(elsewhere["permissions"]) == "local.custom_role_definitions[each.value.role].permissions"
    assert expression(elsewhere["role_id"]) == "local.custom_role_id[each.value.role]"


def test_every_shared_role_is_weighed_for_each_project_and_each_cluster() -> None:
    """Which roles each project gets is evaluated by Terraform in test_terraform_plan.py; here, that the
    lists of roles agree."""
    definitions = set(ROOT.local("custom_role_definitions"))
    weighed = expression(ROOT.local("custom_roles_needed"))
    assert set(re.findall(r'"([a-z_]+)"', weighed.split("setunion")[0])) == definitions
    needed = expression(ROOT.local("roles_needed"))
    assert set(re.findall(r"\b(cluster|surge|firestore|hpa_floor|prometheus) = ", needed)) == definitions
    by_project = expression(ROOT.local("custom_roles_by_project"))
    assert "for project in local.cluster_projects" in by_project
    assert 'key == "firestore" || project == var.project_id ? local.custom_roles[key]' in by_project
    assert 'google_project_iam_custom_role.cluster_project["${project}/${key}"].name' in by_project


def test_the_compactor_account_gets_cluster_permissions_in_iam_mode_and_firestore_ones_with_firestore() -> None:
    granted = expression(MODULE.local("function_roles"))
    assert 'var.access_mode == "iam" ? {cluster = var.custom_roles.cluster} : {}' in granted
    assert "local.use_firestore ? {firestore = var.custom_roles.firestore} : {}" in granted
    assert "hpa_floor" not in granted and "prometheus" not in granted
    grant = MODULE.resource("google_project_iam_member", "function")
    assert expression(grant["for_each"]) == "local.function_roles"
    assert expression(grant["member"]) == "google_service_account.function.member"


def test_the_surge_permissions_are_granted_only_where_a_pool_opts_in_or_the_cluster_says_so() -> None:
    granted = expression(MODULE.local("function_roles"))
    assert 'var.access_mode == "iam" && local.surges ? {surge = var.custom_roles.surge} : {}' in granted
    surges = expression(MODULE.local("surges"))
    assert surges.startswith("var.surge_single_replicas != null ? var.surge_single_replicas : anytrue(")
    assert "try(settings.enabled, false) == true && try(settings.surgeSingleReplicas, false) == true" in surges
    assert MODULE.variable_default("surge_single_replicas") is None
    shared = expression(ROOT.local("roles_needed"))
    assert 'try(settings.access_mode, null) != "rbac"' in shared
    assert "try(pool.enabled, false) == true && try(pool.surgeSingleReplicas, false) == true" in shared
    assert "try(settings.surge_single_replicas, null)" in shared


def test_the_surge_rbac_manifest_grants_exactly_the_surge_rules_and_is_filled_in_only_where_needed() -> None:
    documents = {doc["kind"]: doc for doc in yaml.safe_load_all(SURGE_RBAC_MANIFEST.read_text()) if doc}
    granted = sorted(
        (group, resource_name, tuple(sorted(rule["verbs"])))
        for rule in documents["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for resource_name in rule["resources"]
    )
    declared = sorted(
        (rule.api_group, rule.resource, tuple(sorted(rule.verbs))) for rule in permissions.SURGE_RBAC_RULES
    )
    assert granted == declared
    assert documents["ClusterRoleBinding"]["roleRef"]["name"] == documents["ClusterRole"]["metadata"]["name"]
    assert documents["ClusterRoleBinding"]["subjects"][0]["name"] == RBAC_PLACEHOLDER
    for document in documents.values():
        assert not any("*" in text for text in strings_in(document))
    assert ROOT.local("surge_rbac_template") == '${file("${path.module}/../deploy/rbac-surge.yaml")}'
    rendered = expression(ROOT.outputs()["surge_rbac_manifests"]["value"])
    assert (
        "replace(local.surge_rbac_template, local.rbac_placeholder, deployment.function_service_account_email)"
        in rendered
    )
    assert 'access_mode, null) == "rbac" && deployment.surge_single_replicas' in rendered


def test_the_hpa_floor_account_gets_hpa_and_prometheus_permissions_never_the_compactors() -> None:
    granted = expression(MODULE.local("hpa_floor_roles"))
    assert granted.startswith("var.hpa_floor_enabled ? ")
    assert 'var.access_mode == "iam" ? {hpa_floor = var.custom_roles.hpa_floor} : {}' in granted
    assert "var.hpa_floor_prometheus_server_url == null ? {prometheus = var.custom_roles.prometheus} : {}" in granted
    assert "custom_roles.cluster" not in granted
    grant = MODULE.resource("google_project_iam_member", "hpa_floor")
    assert expression(grant["for_each"]) == "local.hpa_floor_roles"
    assert expression(grant["member"]) == "google_service_account.hpa_floor[0].member"


def test_rbac_mode_gives_the_functions_only_cluster_viewer_in_iam() -> None:
    for name, count in (
        ("function_cluster_viewer", 'var.access_mode == "rbac" ? 1 : 0'),
        ("hpa_floor_cluster_viewer", 'var.access_mode == "rbac" && var.hpa_floor_enabled ? 1 : 0'),
    ):
        grant = MODULE.resource("google_project_iam_member", name)
        assert grant["role"] == "roles/container.clusterViewer"
        assert expression(grant["count"]) == count
    predefined_roles = {
        str(body["role"])
        for body in MODULE.resources("google_project_iam_member").values()
        if not str(body["role"]).startswith("${")
    }
    assert predefined_roles == {"roles/container.clusterViewer"}


def test_what_concerns_the_cluster_is_granted_in_the_clusters_project_and_firestore_in_the_functions() -> None:
    assert MODULE.local("role_projects") == {
        "cluster": "${local.cluster_project}",
        "surge": "${local.cluster_project}",
        "hpa_floor": "${local.cluster_project}",
        "prometheus": "${local.cluster_project}",
        "firestore": "${var.project_id}",
    }
    for name in ("function", "hpa_floor"):
        grant = MODULE.resource("google_project_iam_member", name)
        assert expression(grant["project"]) == "local.role_projects[each.key]", name
        conditions = [expression(check["condition"]) for check in nested(grant, "lifecycle")["precondition"]]
        assert any('"projects/${local.role_projects[each.key]}/roles/"' in condition for condition in conditions), name
    for name in ("function_cluster_viewer", "hpa_floor_cluster_viewer"):
        grant = MODULE.resource("google_project_iam_member", name)
        assert expression(grant["project"]) == "local.cluster_project", name
    # Everything else the module creates lives in the function's project.
    for resource_type, name, body in MODULE.all_resources():
        if "project" in body and resource_type != "google_project_iam_member":
            assert expression(body["project"]) == "var.project_id", f"{resource_type}.{name}"


@pytest.mark.parametrize(
    "path",
    [
        "projects/shop-prod/locations/europe-west1/clusters/main",
        "projects/shop-prod/locations/europe-west1-b/clusters/main-2",
        "projects/a12345/locations/us-central1/clusters/c",
    ],
)
def test_a_cluster_path_terraform_accepts_is_one_the_function_reads_the_same_way(path: str) -> None:
    pattern = expression(ROOT.local("cluster_path_pattern"))
    validations = ROOT.variables()["clusters"]["validation"]
    assert sum(pattern in str(validation["condition"]) for validation in validations) == 1
    match = re.fullmatch(pattern.strip("^$"), path)
    assert match is not None
    assert gke.parse_cluster_name(path) == gke.ClusterName(match["project"], match["location"], match["name"])


def _rbac_documents(manifest: Path = RBAC_MANIFEST) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(manifest.read_text()) if doc}


# Where a rule holds: everywhere (a ClusterRole), or in the namespace of the Role that grants it.
Scope = str
ROLE_SCOPES: dict[str, Scope] = {
    permissions.DEFAULT_LEASE_NAMESPACE: "lease namespace",
    permissions.DEFAULT_PLACEHOLDER_NAMESPACE: "placeholder namespace",
}


def granted_rules(manifest: Path) -> list[tuple[Scope, str, str, tuple[str, ...], tuple[str, ...]]]:
    """(where, group, resource, resource names, verbs) of every rule the manifest grants."""
    documents = _rbac_documents(manifest)
    return sorted(
        (
            "cluster" if kind == "ClusterRole" else ROLE_SCOPES[documents[kind]["metadata"]["namespace"]],
            group,
            resource,
            tuple(rule.get("resourceNames", ())),
            tuple(sorted(rule["verbs"])),
        )
        for kind in ("ClusterRole", "Role")
        if kind in documents
        for rule in documents[kind]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    )


def declared_rules(
    rules: tuple[permissions.RbacRule, ...],
) -> list[tuple[Scope, str, str, tuple[str, ...], tuple[str, ...]]]:
    def scope(rule: permissions.RbacRule) -> Scope:
        if rule.lease_namespace:
            return "lease namespace"
        return "placeholder namespace" if rule.placeholder_namespace else "cluster"

    return sorted(
        (scope(rule), rule.api_group, rule.resource, rule.resource_names, tuple(sorted(rule.verbs))) for rule in rules
    )


@pytest.mark.parametrize(
    ("manifest", "rules"),
    [
        pytest.param(RBAC_MANIFEST, permissions.RBAC_RULES, id="compactor"),
        pytest.param(HPA_FLOOR_RBAC_MANIFEST, permissions.HPA_FLOOR_RBAC_RULES, id="hpa-floor"),
        pytest.param(REPLACEMENT_MANIFEST, permissions.PLACEHOLDER_RBAC_RULES, id="replacement"),
    ],
)
def test_the_rbac_manifest_grants_exactly_the_rules_the_code_declares(
    manifest: Path, rules: tuple[permissions.RbacRule, ...]
) -> None:
    assert granted_rules(manifest) == declared_rules(rules)
    documents = _rbac_documents(manifest)
    for kind in ("ClusterRole", "Role"):
        assert all(
            set(rule) <= {"apiGroups", "resources", "resourceNames", "verbs"}
            for rule in documents.get(kind, {}).get("rules", [])
        )


@pytest.mark.parametrize(
    ("manifest", "lease"),
    [
        pytest.param(RBAC_MANIFEST, permissions.COMPACTOR_LEASE, id="compactor"),
        pytest.param(HPA_FLOOR_RBAC_MANIFEST, permissions.HPA_FLOOR_LEASE, id="hpa-floor"),
    ],
)
def test_the_lease_is_granted_in_its_namespace_only_and_by_name_except_create(manifest: Path, lease: str) -> None:
    documents = _rbac_documents(manifest)
    assert not any("leases" in rule["resources"] for rule in documents["ClusterRole"]["rules"])
    role, binding = documents["Role"], documents["RoleBinding"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == permissions.DEFAULT_LEASE_NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == documents["ClusterRoleBinding"]["subjects"]
    for rule in role["rules"]:
        assert rule["resources"] == ["leases"]
        # RBAC ignores resourceNames for create: a create rule with names would only look narrower.
        assert rule.get("resourceNames") == (None if rule["verbs"] == ["create"] else [lease])
    assert sorted(verb for rule in role["rules"] for verb in rule["verbs"]) == ["create", "get", "update"]
    # Terraform's outputs replace this exact text with each cluster's Lease namespace.
    assert manifest.read_text().count(ROOT.local("rbac_lease_namespace")) == 2


def test_the_lease_names_are_the_ones_the_code_holds() -> None:
    from compactor.hpa import cluster
    from compactor.kube import client as kube

    assert (permissions.COMPACTOR_LEASE, permissions.HPA_FLOOR_LEASE) == (kube.LEASE_NAME, cluster.LEASE_NAME)
    from compactor import service

    assert permissions.DEFAULT_LEASE_NAMESPACE == service.DEFAULT_LEASE_NAMESPACE


def test_the_rbac_manifest_has_no_wildcard() -> None:
    for manifest in (RBAC_MANIFEST, HPA_FLOOR_RBAC_MANIFEST, REPLACEMENT_MANIFEST):
        for document in yaml.safe_load_all(manifest.read_text()):
            for text in strings_in(document):
                assert "*" not in text


def test_the_rbac_manifests_are_filled_in_with_each_clusters_accounts_and_lease_namespace() -> None:
    documents = _rbac_documents()
    binding = documents["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": documents["ClusterRole"]["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": RBAC_PLACEHOLDER}]
    assert ROOT.local("rbac_placeholder") == RBAC_PLACEHOLDER
    assert ROOT.local("rbac_template") == '${file("${path.module}/../deploy/rbac.yaml")}'
    assert ROOT.local("rbac_lease_namespace") == f"namespace: {permissions.DEFAULT_LEASE_NAMESPACE}"
    lease_namespace = 'local.rbac_lease_namespace, "namespace: ${deployment.lease_namespace}"'
    rendered = expression(ROOT.outputs()["rbac_manifests"]["value"])
    assert "replace(local.rbac_template, local.rbac_placeholder, deployment.function_service_account_email)" in rendered
    assert lease_namespace in rendered
    assert 'access_mode, null) == "rbac"' in rendered

    hpa_floor = expression(ROOT.outputs()["hpa_floor_rbac_manifests"]["value"])
    assert "deployment.hpa_floor_service_account_email" in hpa_floor
    assert lease_namespace in hpa_floor
    assert "fileexists(local.hpa_floor_rbac_path)" in expression(ROOT.local("hpa_floor_rbac_template"))
    assert ROOT.local("hpa_floor_rbac_path") == "${path.module}/../deploy/rbac-hpa-floor.yaml"
    assert expression(ROOT.local("deployments")).count("lease_namespace = deployment.lease_namespace") == 1
    assert expression(MODULE.outputs()["lease_namespace"]["value"]) == "var.lease_namespace"


# --- node replacement's namespace, PriorityClass and Role ---------------------------


def test_the_placeholder_namespace_is_the_configurations_default_and_enforces_pod_security_restricted() -> None:
    from compactor.settings.config import Config

    namespace = _rbac_documents(REPLACEMENT_MANIFEST)["Namespace"]
    assert namespace["apiVersion"] == "v1"
    assert namespace["metadata"]["name"] == permissions.DEFAULT_PLACEHOLDER_NAMESPACE
    assert Config.model_validate({"nodePools": {}}).placeholder_namespace == permissions.DEFAULT_PLACEHOLDER_NAMESPACE
    # Whoever may create pods in it: none of them privileged, none reaching the node (hostPath, host namespaces).
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_placeholder_priority_class_is_the_lowest_the_autoscaler_scales_up_for_and_never_preempts() -> None:
    from compactor.core.model import PLACEHOLDER_PRIORITY_CLASS

    priority_class = _rbac_documents(REPLACEMENT_MANIFEST)["PriorityClass"]
    assert priority_class["apiVersion"] == "scheduling.k8s.io/v1"
    assert priority_class["metadata"]["name"] == PLACEHOLDER_PRIORITY_CLASS
    # The Cluster Autoscaler ignores pods below --expendable-pods-priority-cutoff (-10 by default).
    assert priority_class["value"] == -10
    assert priority_class["preemptionPolicy"] == "Never"
    assert priority_class["globalDefault"] is False
    assert "expendable-pods-priority-cutoff" in priority_class["description"]


def test_the_placeholder_role_holds_in_the_placeholder_namespace_only_and_binds_the_functions_account() -> None:
    documents = _rbac_documents(REPLACEMENT_MANIFEST)
    assert set(documents) == {"Namespace", "PriorityClass", "Role", "RoleBinding"}, "nothing cluster-wide is granted"
    role, binding = documents["Role"], documents["RoleBinding"]
    assert role["metadata"]["name"] == binding["metadata"]["name"] == permissions.PLACEHOLDER_ROLE
    namespace = documents["Namespace"]["metadata"]["name"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == namespace
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": RBAC_PLACEHOLDER}]
    assert not any(rule.placeholder_namespace for rule in permissions.RBAC_RULES), "deploy/rbac.yaml stays as it was"


def test_no_iam_role_can_create_or_delete_pods() -> None:
    """IAM cannot hold a permission in one namespace: the placeholders' writes come from the Role alone."""
    for role in ROOT.local("custom_role_definitions").values():
        assert not {"container.pods.create", "container.pods.delete"} & set(strings_in(role)), role["title"]


def test_the_replacement_manifests_are_printed_in_either_access_mode_where_replacement_is_used() -> None:
    assert ROOT.local("replacement_template") == '${file("${path.module}/../deploy/replacement.yaml")}'
    rendered = expression(ROOT.outputs()["replacement_manifests"]["value"])
    assert (
        "replace(local.replacement_template, local.rbac_placeholder, deployment.function_service_account_email)"
        in rendered
    )
    assert 'local.placeholder_namespace_pattern, "  $1: ${deployment.placeholder_namespace}"' in rendered
    assert rendered.rstrip().endswith("if deployment.node_replacement}"), "in iam mode as in rbac mode"
    assert "access_mode" not in rendered
    deployments = expression(ROOT.local("deployments"))
    assert "placeholder_namespace = deployment.placeholder_namespace" in deployments
    assert "node_replacement = deployment.node_replacement" in deployments
    assert expression(MODULE.outputs()["placeholder_namespace"]["value"]) == "var.placeholder_namespace"
    assert expression(MODULE.outputs()["node_replacement"]["value"]) == "local.replaces"


def test_the_placeholder_namespace_pattern_finds_the_namespace_three_times_and_nothing_else() -> None:
    """The pattern is RE2 (Terraform's regex); Python's `re` reads this one the same way."""
    pattern = ROOT.local("placeholder_namespace_pattern")
    assert pattern.startswith("/") and pattern.endswith("/")
    text = REPLACEMENT_MANIFEST.read_text()
    found = re.findall(pattern[1:-1], text)
    assert found == ["name", "namespace", "namespace"]
    assert f"name: {permissions.DEFAULT_PLACEHOLDER_NAMESPACE}\n" in text


def test_the_module_writes_the_placeholder_namespace_into_the_configuration_and_derives_replacement() -> None:
    config = expression(MODULE.local("config"))
    assert "{placeholderNamespace = var.placeholder_namespace}" in config
    assert MODULE.variable_default("placeholder_namespace") == permissions.DEFAULT_PLACEHOLDER_NAMESPACE
    assert MODULE.variable_default("node_replacement") is None
    replaces = expression(MODULE.local("replaces"))
    assert replaces.startswith("var.node_replacement != null ? var.node_replacement : anytrue(")
    assert "try(settings.enabled, false) == true && try(settings.replacement.enabled, false) == true" in replaces


# --- what the functions are built from -----------------------------------------


def _excluded(path: str) -> bool:
    return re.search(ROOT.local("source_excluded_pattern"), path) is not None


@pytest.mark.parametrize(
    ("path", "excluded"),
    [
        pytest.param("compactor/__init__.py", False, id="package"),
        pytest.param("compactor/core/plan.py", False, id="subpackage"),
        pytest.param("compactor/py.typed", False, id="marker"),
        pytest.param("compactor/__pycache__/errors.cpython-311.pyc", True, id="pycache"),
        pytest.param("compactor/core/__pycache__/plan.cpython-311.pyc", True, id="nested-pycache"),
        pytest.param("compactor/core/plan.pyc", True, id="stray-bytecode"),
        # Python writes bytecode to a temporary name first, then renames it.
        pytest.param("compactor/__pycache__/plan.cpython-311.pyc.1402", True, id="bytecode-being-written"),
        pytest.param("compactor/.mypy_cache/3.11/x.json", True, id="hidden-cache"),
        pytest.param("compactor/.DS_Store", True, id="hidden-file"),
    ],
)
def test_caches_and_hidden_files_never_reach_the_archive(path: str, excluded: bool) -> None:
    assert _excluded(path) is excluded


def test_the_archive_holds_only_main_py_the_compactor_package_and_requirements() -> None:
    files = expression(ROOT.local("source_files"))
    assert files.startswith('concat(["main.py", "requirements.txt"], ')
    assert re.findall(r'fileset\([^,]+, "([^"]+)"\)', files) == ["compactor/**"]
    assert "regexall(local.source_excluded_pattern, source_file)) == 0" in files
    assert ROOT.local("repository_root") == "${path.module}/.."

    archive = ROOT.blocks["data"][0]["archive_file"]["source"]
    source = archive["dynamic"][0]["source"]
    assert expression(source["for_each"]) == "local.source_files"
    assert "source_dir" not in archive
    assert "source_file" not in archive


def test_every_module_of_the_package_is_archived() -> None:
    modules = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in (REPO_ROOT / "compactor").rglob("*.py")
        if not any(part == "__pycache__" or part.startswith(".") for part in path.parts)
    ]
    assert "compactor/permissions.py" in modules
    assert [module for module in modules if _excluded(module)] == []


def test_every_code_change_uploads_a_new_object_and_redeploys_both_functions() -> None:
    archive_object = ROOT.resource("google_storage_bucket_object", "source")
    assert "data.archive_file.source.output_md5" in archive_object["name"]
    assert expression(archive_object["source"]) == "data.archive_file.source.output_path"
    for function in (compactor_function(), hpa_floor_function()):
        storage = nested(function, "build_config", "source", "storage_source")
        assert expression(storage["bucket"]) == "var.source_archive.bucket"
        assert expression(storage["object"]) == "var.source_archive.object"


def test_the_source_bucket_is_private_and_versioned() -> None:
    bucket = ROOT.resource("google_storage_bucket", "source")
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert nested(bucket, "versioning")["enabled"] is True


@pytest.mark.parametrize(
    ("function", "entry_point"),
    [pytest.param("compactor", "compact", id="compactor"), pytest.param("hpa_floor", "hpa_floor", id="hpa-floor")],
)
def test_each_function_is_a_python_function_with_its_entry_point(function: str, entry_point: str) -> None:
    build = nested(MODULE.resource("google_cloudfunctions2_function", function), "build_config")
    assert build["entry_point"] == entry_point
    assert expression(build["runtime"]) == "var.runtime"
    runtime = MODULE.variables()["runtime"]
    assert runtime["default"] in {"python311", "python312"}
    assert set(re.findall(r'"(python3\d+)"', expression(nested(runtime, "validation")["condition"]))) <= {
        "python311",
        "python312",
    }


@pytest.mark.parametrize(
    "function", [pytest.param("compactor", id="compactor"), pytest.param("hpa_floor", id="hpa-floor")]
)
def test_each_function_runs_one_instance_serving_one_request(function: str) -> None:
    service = nested(MODULE.resource("google_cloudfunctions2_function", function), "service_config")
    assert service["max_instance_count"] == 1
    assert service["max_instance_request_concurrency"] == 1


# --- what waits for what --------------------------------------------------------


def test_no_build_starts_before_the_build_accounts_roles_had_time_to_propagate() -> None:
    wait = ROOT.resource("time_sleep", "build_iam")
    assert expression(wait["create_duration"]) == "var.iam_propagation_wait"
    assert ROOT.variable_default("iam_propagation_wait") == "120s"
    triggers = {key: expression(value) for key, value in wait["triggers"].items()}
    assert triggers["service_account"] == "google_service_account.build.id"
    assert "google_project_iam_member.build" in triggers["project_roles"]
    assert triggers["repository_role"] == "google_artifact_registry_repository_iam_member.build.id"

    # The functions learn the build account only from the wait.
    assert expression(CALL["build_service_account"]) == 'time_sleep.build_iam.triggers["service_account"]'
    for function in (compactor_function(), hpa_floor_function()):
        assert expression(nested(function, "build_config")["service_account"]) == "var.build_service_account"


def test_the_build_account_reads_objects_and_writes_logs_and_images_only() -> None:
    grant = ROOT.resource("google_project_iam_member", "build")
    assert set(re.findall(r'"(roles/[^"]+)"', expression(grant["for_each"]))) == {
        "roles/logging.logWriter",
        "roles/storage.objectViewer",
    }
    repository_grant = ROOT.resource("google_artifact_registry_repository_iam_member", "build")
    assert repository_grant["role"] == "roles/artifactregistry.writer"
    # The choice of storage role names the page it follows.
    iam_tf = (ROOT_DIR / "iam.tf").read_text()
    assert "https://cloud.google.com/run/docs/configuring/services/build-service-account" in iam_tf


def test_an_alert_is_created_only_after_its_log_metric_had_time_to_become_known() -> None:
    wait = ROOT.resource("time_sleep", "log_metrics")
    assert expression(wait["count"]) == "local.any_alert ? 1 : 0"
    assert expression(wait["create_duration"]) == "var.log_metric_propagation_wait"
    assert ROOT.variable_default("log_metric_propagation_wait") == "600s"
    assert expression(wait["triggers"]) == "local.log_metric_types"
    assert expression(ROOT.local("log_metric_types_for_clusters")) == (
        "local.any_alert ? time_sleep.log_metrics[0].triggers : local.log_metric_types"
    )
    assert expression(CALL["log_metric_types"]) == "local.log_metric_types_for_clusters"
    assert "google_logging_metric.events" in expression(ROOT.local("log_metric_types"))

    threshold = nested(
        MODULE.resource("google_monitoring_alert_policy", "failed_runs"), "conditions", "condition_threshold"
    )
    assert 'var.log_metric_types["failed-runs"]' in threshold["filter"]
    assert MODULE.resources("google_logging_metric") == {}


def test_the_scheduler_waits_longer_than_the_function_which_outlives_its_run_budget() -> None:
    service = nested(compactor_function(), "service_config")
    assert expression(service["timeout_seconds"]) == "var.function_timeout_seconds"
    assert (
        expression(MODULE.local("function_environment")).count(
            "COMPACTOR_RUN_BUDGET_SECONDS = tostring(var.run_budget_seconds)"
        )
        == 1
    )

    job = MODULE.resource("google_cloud_scheduler_job", "compactor")
    assert job["attempt_deadline"] == "${local.scheduler_attempt_deadline_seconds}s"
    margin = re.fullmatch(
        r"var\.function_timeout_seconds \+ (\d+)", expression(MODULE.local("scheduler_attempt_deadline_seconds"))
    )
    assert margin, "the attempt deadline is derived from the function timeout"

    budget = MODULE.variable_default("run_budget_seconds")
    timeout = MODULE.variable_default("function_timeout_seconds")
    deadline = timeout + int(margin.group(1))
    assert budget < timeout < deadline <= 1800
    assert (budget, timeout, deadline) == (240, 300, 330)


def test_a_run_budget_at_or_above_the_function_timeout_is_rejected() -> None:
    condition = expression(nested(MODULE.variables()["run_budget_seconds"], "validation")["condition"])
    assert "var.run_budget_seconds < var.function_timeout_seconds" in condition
    condition = expression(nested(MODULE.variables()["hpa_floor_run_budget_seconds"], "validation")["condition"])
    assert "var.hpa_floor_run_budget_seconds < var.hpa_floor_timeout_seconds" in condition


@pytest.mark.parametrize("job", [pytest.param("compactor", id="compactor"), pytest.param("hpa_floor", id="hpa-floor")])
def test_the_schedulers_do_not_pile_up_retries(job: str) -> None:
    retry = nested(MODULE.resource("google_cloud_scheduler_job", job), "retry_config")
    assert 0 <= retry["retry_count"] <= 1


# --- the HPA floor job ----------------------------------------------------------


def test_the_hpa_floor_job_is_off_by_default_and_runs_every_minute_when_on() -> None:
    assert MODULE.variable_default("hpa_floor_enabled") is False
    assert MODULE.variable_default("hpa_floor_schedule") == "* * * * *"
    for resource_type, name in (
        ("google_cloudfunctions2_function", "hpa_floor"),
        ("google_cloud_scheduler_job", "hpa_floor"),
        ("google_service_account", "hpa_floor"),
    ):
        assert expression(MODULE.resource(resource_type, name)["count"]) == "var.hpa_floor_enabled ? 1 : 0"
    job = MODULE.resource("google_cloud_scheduler_job", "hpa_floor")
    assert expression(job["schedule"]) == "var.hpa_floor_schedule"


def test_the_hpa_floor_scheduler_calls_with_its_own_oidc_token_and_dry_run_parameter() -> None:
    target = nested(MODULE.resource("google_cloud_scheduler_job", "hpa_floor"), "http_target")
    token = nested(target, "oidc_token")
    assert expression(target["uri"]) == (
        'var.hpa_floor_dry_run ? "${local.hpa_floor_function_url}?dryRun=true" : local.hpa_floor_function_url'
    )
    assert expression(token["audience"]) == "local.hpa_floor_function_url"
    assert expression(token["service_account_email"]) == "google_service_account.scheduler.email"


def test_the_hpa_floor_function_reads_estafettes_variable_names_and_the_shared_cluster_access() -> None:
    environment = expression(MODULE.local("hpa_floor_environment"))
    assert environment.startswith("merge(local.function_environment, ")
    for name in ("MINIMUM_REPLICAS_LOWER_BOUND", "PROMETHEUS_SERVER_URL", "PROMETHEUS_URL_ALLOWLIST"):
        assert f"{name} = " in environment
    assert MODULE.variable_default("hpa_floor_minimum_replicas_lower_bound") == 3
    service = nested(hpa_floor_function(), "service_config")
    assert expression(service["environment_variables"]) == "local.hpa_floor_environment"


# --- configuration, environment and endpoints ---------------------------------


def test_the_function_environment_carries_the_names_the_python_code_reads() -> None:
    environment = expression(MODULE.local("function_environment"))
    for name, value in {
        "COMPACTOR_CLUSTER": "local.cluster_id",
        "COMPACTOR_ENDPOINT_MODE": "var.endpoint_mode",
        "COMPACTOR_LEASE_NAMESPACE": "var.lease_namespace",
    }.items():
        assert f"{name} = {value}" in environment
    assert "local.config_source_environment[var.config_source]" in environment

    by_source = MODULE.local("config_source_environment")
    assert by_source["env"] == {"COMPACTOR_CONFIG": "${local.config_json}"}
    assert by_source["firestore"] == {
        "COMPACTOR_FIRESTORE_DOCUMENT": "${local.firestore_document}",
        "COMPACTOR_FIRESTORE_DATABASE": "${var.firestore_database}",
    }
    assert MODULE.local("cluster_id") == (
        "projects/${local.cluster_project}/locations/${var.cluster.location}/clusters/${var.cluster.name}"
    )
    assert expression(MODULE.local("cluster_project")) == "coalesce(var.cluster.project, var.project_id)"
    assert MODULE.variable_default("lease_namespace") == "kube-system"
    service = nested(compactor_function(), "service_config")
    assert expression(service["environment_variables"]) == "local.function_environment"


def test_the_endpoint_modes_are_the_ones_the_code_knows_with_dns_by_default() -> None:
    variable = MODULE.variables()["endpoint_mode"]
    assert variable["default"] == "dns"
    allowed = re.findall(r'"([a-z-]+)"', expression(nested(variable, "validation")["condition"]))
    assert tuple(allowed) == gke.ENDPOINT_MODES


def test_the_private_ip_mode_is_refused_without_a_way_into_the_vpc() -> None:
    conditions = [expression(v["condition"]) for v in MODULE.variables()["direct_vpc_egress"]["validation"]]
    assert (
        'var.endpoint_mode != "private-ip" || var.direct_vpc_egress != null || var.vpc_connector != null' in conditions
    )


def test_each_cluster_gets_its_own_firestore_document_by_default() -> None:
    assert MODULE.variable_default("firestore_document") is None
    assert (
        expression(MODULE.local("firestore_document"))
        == 'coalesce(var.firestore_document, "node-compactor/${var.name}")'
    )
    document = MODULE.resource("google_firestore_document", "config")
    assert expression(document["count"]) == "local.use_firestore ? 1 : 0"
    assert expression(document["fields"]) == "jsonencode({config = {stringValue = local.config_json}})"
    database = ROOT.resource("google_firestore_database", "config")
    assert "var.create_firestore_database" in expression(database["count"])
    assert ROOT.variable_default("create_firestore_database") is False


def test_the_rendered_config_drops_nulls_and_takes_dry_run_from_its_variable() -> None:
    config = expression(MODULE.local("config"))
    assert "for key, value in var.config : key => value if value != null" in config
    assert "for key, value in settings : key => value if value != null" in config
    assert "{dryRun = var.dry_run}" in config
    assert expression(MODULE.local("config_json")) == "jsonencode(local.config)"
    rejects_dry_run_key = [
        validation
        for validation in MODULE.variables()["config"]["validation"]
        if "var.config.dryRun" in str(validation["condition"])
    ]
    assert rejects_dry_run_key
    assert MODULE.variable_default("schedule") == "*/5 * * * *"
    assert MODULE.variable_default("dry_run") is False


# --- APIs and monitoring ----------------------------------------------------------


def test_apis_are_left_enabled_when_the_module_is_destroyed() -> None:
    services = ROOT.resources("google_project_service")
    assert services
    for body in services.values():
        assert body["disable_on_destroy"] is False
        assert body["disable_dependent_services"] is False


def test_every_api_the_module_uses_is_enabled() -> None:
    apis = set(strings_in(ROOT.local("apis")))
    for api in (
        "cloudfunctions.googleapis.com",
        "run.googleapis.com",
        "cloudbuild.googleapis.com",
        "artifactregistry.googleapis.com",
        "cloudscheduler.googleapis.com",
        "container.googleapis.com",
        "logging.googleapis.com",
        "monitoring.googleapis.com",
        "iam.googleapis.com",
    ):
        assert any(api in text for text in apis), api
    assert "firestore.googleapis.com" in str(ROOT.local("apis"))


def test_one_set_of_log_metrics_counts_the_events_every_clusters_function_logs() -> None:
    metrics = ROOT.local("log_metrics")
    assert set(metrics) == set(METRICS)
    assert {key: metric["event"] for key, metric in metrics.items()} == {
        "runs": "run-summary",
        "drains-started": "drain-started",
        "drains-completed": "drain-completed",
        "rollbacks": "rollback",
        "failed-runs": "run-failed",
        "nodes-awaiting-removal": "run-summary",
        "cluster-price-per-hour": "run-summary",
        "savings-per-hour": "run-summary",
    }
    assert metrics["failed-runs"]["severity"] == "ERROR"
    # The fields the run-summary line carries for them (compactor/service.py).
    assert metrics["nodes-awaiting-removal"]["value_field"] == "jsonPayload.nodesAwaitingRemoval"
    assert metrics["cluster-price-per-hour"]["value_field"] == "jsonPayload.clusterPricePerHour"
    assert metrics["savings-per-hour"]["value_field"] == "jsonPayload.savingsPerHour"
    assert "cluster-price-per-hour" in expression(ROOT.local("money_metrics"))
    assert "savings-per-hour" in expression(ROOT.local("money_metrics"))

    metric = ROOT.resource("google_logging_metric", "events")
    assert expression(metric["for_each"]) == "local.log_metrics"
    log_filter = expression(metric["filter"])
    for clause in (
        'resource.type=\\"cloud_run_revision\\"',
        "local.services_filter",
        'jsonPayload.event=\\"${each.value.event}\\"',
    ):
        assert clause in log_filter
    assert "settings.name" in expression(ROOT.local("compactor_services"))


def test_the_log_metrics_carry_a_cluster_label_taken_from_the_function_that_logged() -> None:
    metric = ROOT.resource("google_logging_metric", "events")
    assert metric["label_extractors"] == {"cluster": "EXTRACT(resource.labels.service_name)"}
    label = nested(metric, "metric_descriptor", "labels")
    assert label["key"] == "cluster"
    assert label["value_type"] == "STRING"


def test_each_cluster_has_a_dashboard_of_its_own_series() -> None:
    dashboard = MODULE.resource("google_monitoring_dashboard", "cluster")
    assert expression(dashboard["count"]) == "var.dashboard_enabled ? 1 : 0"
    assert MODULE.variable_default("dashboard_enabled") is True
    tiles = MODULE.local("dashboard_tiles")
    assert [tile["metric"] for tile in tiles] == list(METRICS)
    assert MODULE.local("cluster_series") == 'metric.label.cluster="${var.name}"'
    rendered = expression(dashboard["dashboard_json"])
    assert "var.log_metric_types[tile.metric]" in rendered
    assert "local.cluster_series" in rendered


def test_the_failed_run_alert_is_optional_and_watches_this_clusters_failed_runs() -> None:
    alert = MODULE.resource("google_monitoring_alert_policy", "failed_runs")
    assert expression(alert["count"]) == "var.alert_on_failed_runs ? 1 : 0"
    assert MODULE.variable_default("alert_on_failed_runs") is False
    threshold = nested(alert, "conditions", "condition_threshold")
    assert "local.cluster_series" in threshold["filter"]
    assert expression(alert["notification_channels"]) == "var.notification_channels"


def test_outputs_name_each_clusters_url_and_accounts() -> None:
    declared = MODULE.outputs()
    assert expression(declared["function_url"]["value"]) == "local.function_url"
    assert expression(declared["function_service_account_email"]["value"]) == "google_service_account.function.email"
    assert expression(declared["scheduler_service_account_email"]["value"]) == "google_service_account.scheduler.email"
    deployments = ROOT.local("deployments")
    assert "for key, deployment in module.cluster" in expression(deployments)
    assert expression(ROOT.outputs()["deployments"]["value"]) == "local.deployments"
    assert expression(declared["dashboard_url"]["value"]) == "local.dashboard_url"
    assert "dashboard_url = deployment.dashboard_url" in expression(deployments)
    assert "deployment.dashboard_url" in expression(ROOT.outputs()["dashboard_urls"]["value"])


@pytest.mark.parametrize("directory", [pytest.param(ROOT_DIR, id="root"), pytest.param(MODULE_DIR, id="module")])
def test_every_checkov_skip_gives_its_reason(directory: Path) -> None:
    skips = [
        match
        for path in directory.glob("*.tf")
        for match in re.finditer(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?", path.read_text())
    ]
    for skip in skips:
        reason = (skip.group(2) or "").strip()
        assert len(reason) > 20, f"{skip.group(1)} has no reason"


# --- the deployment guide ---------------------------------------------------------


def _deploy_guide_section(heading: str) -> str:
    text = (REPO_ROOT / "docs" / "deploy.md").read_text()
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_guide_has_a_row_for_each_kind_of_control_plane_naming_modes_the_code_knows() -> None:
    section = _deploy_guide_section("Reaching the control plane")
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| the cluster")]
    kinds = [row.split("|")[1].strip() for row in rows if not set(row) <= {"|", "-", " "}]
    assert kinds == [
        "public endpoint, no authorized networks",
        "public endpoint with authorized networks",
        "private endpoint only (public endpoint off)",
        "DNS endpoint only (IP access off)",
    ]
    named_modes = set(re.findall(r"`(dns|ip|private-ip)`", section))
    assert named_modes == set(gke.ENDPOINT_MODES)


def test_the_guide_lists_every_permission_to_verify_for_custom_roles() -> None:
    section = _deploy_guide_section("Access modes")
    declared = {
        *permissions.IAM_PERMISSIONS,
        *permissions.FIRESTORE_IAM_PERMISSIONS,
        *permissions.HPA_FLOOR_IAM_PERMISSIONS,
        *permissions.PROMETHEUS_IAM_PERMISSIONS,
    }
    command = section[section.index("--filter=") : section.index("--format")]
    assert set(re.findall(r"[a-z]+\.[A-Za-z]+\.[A-Za-z]+", command)) == declared
