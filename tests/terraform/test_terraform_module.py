"""The Terraform module's wiring, read from its HCL: who may call the function,
what the function may do, what it is built from and how long each part waits.

Terraform itself cannot plan here (no providers), so these tests parse the
files with python-hcl2 and check the expressions that carry each promise.
The permission lists are imported from `compactor.permissions`, never copied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml
from hcl2.utils import SerializationOptions

from compactor import permissions

REPO_ROOT = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = REPO_ROOT / "terraform"
RBAC_MANIFEST = REPO_ROOT / "deploy" / "rbac.yaml"

# Plain dicts without block markers; string literals without their quotes.
# Expressions keep their "${...}" wrapper.
HCL_OPTIONS = SerializationOptions(explicit_blocks=False, strip_string_quotes=True, with_comments=False)

RBAC_PLACEHOLDER = "FUNCTION_SERVICE_ACCOUNT_EMAIL"
PUBLIC_PRINCIPALS = ("allUsers", "allAuthenticatedUsers")


# --- reading the module -------------------------------------------------------


def _parse_module() -> dict[str, list[dict[str, Any]]]:
    module: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(TERRAFORM_DIR.glob("*.tf")):
        parsed = hcl2.loads(path.read_text(), serialization_options=HCL_OPTIONS)
        for block_type, blocks in parsed.items():
            module.setdefault(block_type, []).extend(blocks)
    return module


MODULE = _parse_module()


def expression(value: Any) -> str:
    """The HCL expression inside a "${...}" wrapper, or the value as text."""
    text = str(value)
    if text.startswith("${") and text.endswith("}"):
        return text[2:-1]
    return text


def resources(resource_type: str) -> dict[str, dict[str, Any]]:
    """Every resource of one type, by name."""
    found: dict[str, dict[str, Any]] = {}
    for block in MODULE.get("resource", []):
        for declared_type, by_name in block.items():
            if declared_type == resource_type:
                found.update(by_name)
    return found


def resource(resource_type: str, name: str) -> dict[str, Any]:
    declared = resources(resource_type)
    assert name in declared, f"terraform/ declares no {resource_type}.{name}"
    return declared[name]


def all_resources() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for block in MODULE.get("resource", []):
        for resource_type, by_name in block.items():
            for name, body in by_name.items():
                yield resource_type, name, body


def locals_() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for block in MODULE.get("locals", []):
        merged.update(block)
    return merged


def local(name: str) -> Any:
    declared = locals_()
    assert name in declared, f"terraform/ declares no local.{name}"
    return declared[name]


def variables() -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for block in MODULE.get("variable", []):
        merged.update(block)
    return merged


def outputs() -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for block in MODULE.get("output", []):
        merged.update(block)
    return merged


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


def variable_default(name: str) -> Any:
    return variables()[name]["default"]


# --- who may call the function ------------------------------------------------


def test_scheduler_calls_the_function_with_an_oidc_token_of_its_own_account() -> None:
    job = resource("google_cloud_scheduler_job", "compactor")
    target = nested(job, "http_target")
    token = nested(target, "oidc_token")

    assert target["http_method"] == "POST"
    assert expression(target["uri"]) == "local.function_url"
    assert expression(token["audience"]) == "local.function_url"
    assert expression(token["service_account_email"]) == "google_service_account.scheduler.email"
    assert "google_cloudfunctions2_function.compactor.service_config[0].uri" in expression(local("function_url"))
    assert "oauth_token" not in target


def test_scheduler_account_is_not_the_function_account() -> None:
    scheduler = resource("google_service_account", "scheduler")
    function = resource("google_service_account", "function")

    assert scheduler["account_id"] != function["account_id"]
    service_account = nested(resource("google_cloudfunctions2_function", "compactor"), "service_config")[
        "service_account_email"
    ]
    assert expression(service_account) == "google_service_account.function.email"


def test_only_the_scheduler_account_and_the_listed_members_may_invoke_the_function() -> None:
    invoker_grants = [
        (resource_type, name, body)
        for resource_type, name, body in all_resources()
        if "invoker" in str(body.get("role", "")) or resource_type.endswith("_iam_policy")
    ]
    assert [(t, n) for t, n, _ in invoker_grants] == [("google_cloud_run_service_iam_member", "invoker")]
    _, _, grant = invoker_grants[0]
    assert grant["role"] == "roles/run.invoker"
    assert expression(grant["service"]) == "google_cloudfunctions2_function.compactor.name"
    assert expression(grant["for_each"]) == "local.invokers"
    assert expression(grant["member"]) == "each.value"
    assert references(expression(local("invokers"))) == {
        "google_service_account.scheduler.member",
        "var.invoker_members",
    }


def _invoker_member_pattern() -> str:
    validation = nested(variables()["invoker_members"], "validation")
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


def test_nothing_in_the_module_is_granted_to_the_public() -> None:
    # Variables may name the public principals in their validation messages.
    granting_blocks = {key: value for key, value in MODULE.items() if key != "variable"}
    for text in strings_in(granting_blocks):
        for principal in PUBLIC_PRINCIPALS:
            assert principal not in text

    for document in yaml.safe_load_all(RBAC_MANIFEST.read_text()):
        for subject in document.get("subjects", []):
            assert not subject["name"].startswith("system:"), subject


def test_the_dry_run_command_calls_the_function_url_with_an_identity_token() -> None:
    command = local("dry_run_command")
    assert command.startswith('curl -H "Authorization: Bearer $(gcloud auth print-identity-token)" ')
    assert command.endswith('"${local.function_url}?dryRun=true"')
    assert expression(outputs()["dry_run_command"]["value"]) == "local.dry_run_command"


# --- what the function may do -------------------------------------------------


def test_the_custom_role_lists_exactly_the_permissions_the_code_declares() -> None:
    assert local("iam_permissions") == list(permissions.IAM_PERMISSIONS)
    assert local("firestore_iam_permissions") == list(permissions.FIRESTORE_IAM_PERMISSIONS)
    role = resource("google_project_iam_custom_role", "function")
    assert expression(role["permissions"]) == "local.function_permissions"


def test_cluster_permissions_come_with_iam_mode_and_firestore_ones_with_firestore_config() -> None:
    granted = expression(local("function_permissions"))
    assert 'var.access_mode == "iam" ? local.iam_permissions : []' in granted
    assert "local.use_firestore ? local.firestore_iam_permissions : []" in granted
    assert references(granted) == {
        "var.access_mode",
        "local.iam_permissions",
        "local.use_firestore",
        "local.firestore_iam_permissions",
    }
    assert expression(local("use_firestore")) == 'var.config_source == "firestore"'


def test_the_custom_role_is_granted_to_the_function_account_alone() -> None:
    grant = resource("google_project_iam_member", "function")
    assert expression(grant["role"]) == "google_project_iam_custom_role.function[0].name"
    assert expression(grant["member"]) == "google_service_account.function.member"
    holders = [
        name
        for name, body in resources("google_project_iam_member").items()
        if "google_project_iam_custom_role.function" in str(body["role"])
    ]
    assert holders == ["function"]


def test_rbac_mode_gives_the_function_only_cluster_viewer_in_iam() -> None:
    grant = resource("google_project_iam_member", "function_cluster_viewer")
    assert grant["role"] == "roles/container.clusterViewer"
    assert expression(grant["count"]) == 'var.access_mode == "rbac" ? 1 : 0'
    assert expression(grant["member"]) == "google_service_account.function.member"
    function_roles = {
        str(body["role"])
        for body in resources("google_project_iam_member").values()
        if "google_service_account.function" in str(body["member"])
    }
    assert function_roles == {
        "${google_project_iam_custom_role.function[0].name}",
        "roles/container.clusterViewer",
    }


def _rbac_documents() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(RBAC_MANIFEST.read_text()) if doc}


def test_the_rbac_manifest_grants_exactly_the_rules_the_code_declares() -> None:
    rules = _rbac_documents()["ClusterRole"]["rules"]
    granted = sorted(
        (group, resource_name, tuple(sorted(rule["verbs"])))
        for rule in rules
        for group in rule["apiGroups"]
        for resource_name in rule["resources"]
    )
    declared = sorted((rule.api_group, rule.resource, tuple(sorted(rule.verbs))) for rule in permissions.RBAC_RULES)
    assert granted == declared
    assert all(set(rule) == {"apiGroups", "resources", "verbs"} for rule in rules)


def test_the_rbac_manifest_has_no_wildcard() -> None:
    for document in yaml.safe_load_all(RBAC_MANIFEST.read_text()):
        for text in strings_in(document):
            assert "*" not in text


def test_the_rbac_manifest_binds_its_role_to_the_function_account_terraform_fills_in() -> None:
    documents = _rbac_documents()
    binding = documents["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": documents["ClusterRole"]["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": RBAC_PLACEHOLDER}]
    rendered = expression(outputs()["rbac_manifest"]["value"])
    assert f'"{RBAC_PLACEHOLDER}", google_service_account.function.email' in rendered
    assert "deploy/rbac.yaml" in rendered


# --- what the function is built from ------------------------------------------


def _excluded(path: str) -> bool:
    return re.search(local("source_excluded_pattern"), path) is not None


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
    files = expression(local("source_files"))
    assert files.startswith('concat(["main.py", "requirements.txt"], ')
    assert re.findall(r'fileset\([^,]+, "([^"]+)"\)', files) == ["compactor/**"]
    assert "regexall(local.source_excluded_pattern, source_file)) == 0" in files
    assert local("repository_root") == "${path.module}/.."

    archive = MODULE["data"][0]["archive_file"]["source"]
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


def test_every_code_change_uploads_a_new_object_and_redeploys() -> None:
    archive_object = resource("google_storage_bucket_object", "source")
    assert "data.archive_file.source.output_md5" in archive_object["name"]
    assert expression(archive_object["source"]) == "data.archive_file.source.output_path"
    storage = nested(
        resource("google_cloudfunctions2_function", "compactor"), "build_config", "source", "storage_source"
    )
    assert expression(storage["object"]) == "google_storage_bucket_object.source.name"


def test_the_source_bucket_is_private_and_versioned() -> None:
    bucket = resource("google_storage_bucket", "source")
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert nested(bucket, "versioning")["enabled"] is True


def test_the_function_is_a_python_function_with_the_compact_entry_point() -> None:
    build = nested(resource("google_cloudfunctions2_function", "compactor"), "build_config")
    assert build["entry_point"] == "compact"
    assert expression(build["runtime"]) == "var.runtime"
    runtime = variables()["runtime"]
    assert runtime["default"] in {"python311", "python312"}
    assert set(re.findall(r'"(python3\d+)"', expression(nested(runtime, "validation")["condition"]))) <= {
        "python311",
        "python312",
    }


def test_the_function_runs_one_instance_serving_one_request() -> None:
    service = nested(resource("google_cloudfunctions2_function", "compactor"), "service_config")
    assert service["max_instance_count"] == 1
    assert service["max_instance_request_concurrency"] == 1


# --- how long each part waits -------------------------------------------------


def test_the_scheduler_waits_longer_than_the_function_which_outlives_its_run_budget() -> None:
    service = nested(resource("google_cloudfunctions2_function", "compactor"), "service_config")
    assert expression(service["timeout_seconds"]) == "var.function_timeout_seconds"
    assert (
        expression(local("function_environment")).count(
            "COMPACTOR_RUN_BUDGET_SECONDS = tostring(var.run_budget_seconds)"
        )
        == 1
    )

    job = resource("google_cloud_scheduler_job", "compactor")
    assert job["attempt_deadline"] == "${local.scheduler_attempt_deadline_seconds}s"
    margin = re.fullmatch(
        r"var\.function_timeout_seconds \+ (\d+)", expression(local("scheduler_attempt_deadline_seconds"))
    )
    assert margin, "the attempt deadline is derived from the function timeout"

    budget = variable_default("run_budget_seconds")
    timeout = variable_default("function_timeout_seconds")
    deadline = timeout + int(margin.group(1))
    assert budget < timeout < deadline <= 1800
    assert (budget, timeout, deadline) == (240, 300, 330)


def test_a_run_budget_at_or_above_the_function_timeout_is_rejected() -> None:
    condition = expression(nested(variables()["run_budget_seconds"], "validation")["condition"])
    assert "var.run_budget_seconds < var.function_timeout_seconds" in condition


def test_the_scheduler_does_not_pile_up_retries() -> None:
    retry = nested(resource("google_cloud_scheduler_job", "compactor"), "retry_config")
    assert 0 <= retry["retry_count"] <= 1


# --- configuration and environment -------------------------------------------


def test_the_function_environment_carries_the_names_the_python_code_reads() -> None:
    environment = expression(local("function_environment"))
    for name, value in {
        "COMPACTOR_CLUSTER": "local.cluster_id",
        "COMPACTOR_ENDPOINT_MODE": "var.endpoint_mode",
        "COMPACTOR_LEASE_NAMESPACE": "var.lease_namespace",
    }.items():
        assert f"{name} = {value}" in environment
    assert "local.config_source_environment[var.config_source]" in environment

    by_source = local("config_source_environment")
    assert by_source["env"] == {"COMPACTOR_CONFIG": "${local.config_json}"}
    assert by_source["firestore"] == {
        "COMPACTOR_FIRESTORE_DOCUMENT": "${var.firestore_document}",
        "COMPACTOR_FIRESTORE_DATABASE": "${var.firestore_database}",
    }
    assert local("cluster_id") == (
        "projects/${var.project_id}/locations/${var.cluster.location}/clusters/${var.cluster.name}"
    )
    assert variable_default("endpoint_mode") == "dns"
    assert variable_default("lease_namespace") == "kube-system"
    service = nested(resource("google_cloudfunctions2_function", "compactor"), "service_config")
    assert expression(service["environment_variables"]) == "local.function_environment"


def test_the_rendered_config_drops_nulls_and_takes_dry_run_from_its_variable() -> None:
    config = expression(local("config"))
    assert "for key, value in var.config : key => value if value != null" in config
    assert "for key, value in settings : key => value if value != null" in config
    assert "{dryRun = var.dry_run}" in config
    assert expression(local("config_json")) == "jsonencode(local.config)"
    rejects_dry_run_key = [
        validation
        for validation in variables()["config"]["validation"]
        if "var.config.dryRun" in str(validation["condition"])
    ]
    assert rejects_dry_run_key


def test_the_firestore_document_holds_the_config_as_one_json_string_field() -> None:
    document = resource("google_firestore_document", "config")
    assert expression(document["count"]) == "local.use_firestore ? 1 : 0"
    assert expression(document["fields"]) == "jsonencode({config = {stringValue = local.config_json}})"
    database = resource("google_firestore_database", "config")
    assert "var.create_firestore_database" in expression(database["count"])
    assert variable_default("create_firestore_database") is False


# --- APIs, variables, monitoring ----------------------------------------------


def test_apis_are_left_enabled_when_the_module_is_destroyed() -> None:
    services = resources("google_project_service")
    assert services
    for body in services.values():
        assert body["disable_on_destroy"] is False
        assert body["disable_dependent_services"] is False


def test_every_api_the_module_uses_is_enabled() -> None:
    apis = set(strings_in(local("apis")))
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
    assert "firestore.googleapis.com" in str(local("apis"))


@pytest.mark.parametrize("name", sorted(variables()))
def test_every_variable_has_a_type_and_a_description(name: str) -> None:
    variable = variables()[name]
    assert variable.get("type"), f"variable {name} has no type"
    assert str(variable.get("description", "")).strip(), f"variable {name} has no description"


def test_the_schedule_defaults_to_every_five_minutes() -> None:
    assert variable_default("schedule") == "*/5 * * * *"
    assert variable_default("dry_run") is False


def test_log_metrics_count_the_events_the_function_logs() -> None:
    metrics = local("log_metrics")
    assert {metric["event"] for metric in metrics.values()} == {
        "drain-started",
        "drain-completed",
        "rollback",
        "run-failed",
    }
    failed = [metric for metric in metrics.values() if metric["event"] == "run-failed"]
    assert failed[0]["severity"] == "ERROR"

    metric = resource("google_logging_metric", "events")
    assert expression(metric["for_each"]) == "local.log_metrics"
    log_filter = expression(metric["filter"])
    for clause in (
        'resource.type=\\"cloud_run_revision\\"',
        'resource.labels.service_name=\\"${var.name}\\"',
        'jsonPayload.event=\\"${each.value.event}\\"',
    ):
        assert clause in log_filter


def test_the_failed_run_alert_is_optional_and_watches_the_failed_run_metric() -> None:
    alert = resource("google_monitoring_alert_policy", "failed_runs")
    assert expression(alert["count"]) == "var.alert_on_failed_runs ? 1 : 0"
    assert variable_default("alert_on_failed_runs") is False
    threshold = nested(alert, "conditions", "condition_threshold")
    assert 'google_logging_metric.events["failed-runs"].name' in threshold["filter"]
    assert expression(alert["notification_channels"]) == "var.notification_channels"


def test_outputs_name_the_url_and_both_service_accounts() -> None:
    declared = outputs()
    assert expression(declared["function_url"]["value"]) == "local.function_url"
    assert expression(declared["function_service_account_email"]["value"]) == ("google_service_account.function.email")
    assert expression(declared["scheduler_service_account_email"]["value"]) == (
        "google_service_account.scheduler.email"
    )


def test_every_checkov_skip_gives_its_reason() -> None:
    skips = [
        match
        for path in TERRAFORM_DIR.glob("*.tf")
        for match in re.finditer(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?", path.read_text())
    ]
    for skip in skips:
        reason = (skip.group(2) or "").strip()
        assert len(reason) > 20, f"{skip.group(1)} has no reason"
