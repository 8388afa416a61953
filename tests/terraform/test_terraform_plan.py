"""Terraform itself evaluates the root module's inputs, locals and module call.

The providers cannot be downloaded here, so `terraform validate` cannot run.
What Terraform CAN do offline is evaluate configuration that needs no
provider: these tests copy the real `variables.tf` of the root and of
modules/node-compactor, the root's `main.tf` (its locals and the module call)
and the module's `main.tf` (its locals) into a scratch directory, stand plain
values in for the few resources they read, and run `terraform apply` on that
(there are no resources, only outputs). Every validation, type conversion,
`nullable = false` default and `try()` runs in Terraform, against the example
tfvars files and against mistakes a user makes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.terraform.test_terraform_module import METRICS

REPO_ROOT = Path(__file__).resolve().parents[2]
ROOT_DIR = REPO_ROOT / "terraform"
MODULE_DIR = ROOT_DIR / "modules" / "node-compactor"

# Resources the copied files read, and the plain values that stand in for them.
ROOT_STAND_INS = {
    "google_storage_bucket.source.name": '"bucket"',
    "google_storage_bucket_object.source.name": '"object"',
    "google_artifact_registry_repository.images.id": '"repository"',
    'time_sleep.build_iam.triggers["service_account"]': '"build"',
    # As iam.tf names them: each project's own roles, and Firestore's of project_id.
    "local.custom_roles_by_project": (
        "{ for project in local.cluster_projects : project => {"
        ' cluster = "projects/${project}/roles/node_compactor",'
        ' surge = "projects/${project}/roles/node_compactor_surge",'
        ' firestore = "projects/${var.project_id}/roles/node_compactor_firestore",'
        ' hpa_floor = "projects/${project}/roles/node_compactor_hpa_floor",'
        ' prometheus = "projects/${project}/roles/node_compactor_prometheus" } }'
    ),
    "local.log_metric_types_for_clusters": (
        "{ for metric in " + json.dumps(list(METRICS)) + ' : metric => "logging.googleapis.com/user/${metric}" }'
    ),
    "local.firestore_database": "var.firestore_database",
    "  depends_on = [google_project_service.apis]\n": "",
}
MODULE_STAND_INS = {
    "google_cloudfunctions2_function.compactor.service_config[0].uri": '"https://compactor.example"',
    "google_cloudfunctions2_function.hpa_floor[0].service_config[0].uri": '"https://hpa-floor.example"',
    # The provider's id of a dashboard: projects/PROJECT_NUMBER/dashboards/DASHBOARD_ID.
    "google_monitoring_dashboard.cluster[0].id": '"projects/123456789012/dashboards/4815162342108000000"',
}
PROVIDER_BLOCK = """provider "google" {
  project        = var.project_id
  region         = var.region
  default_labels = var.labels
}
"""

MODULE_OUTPUTS = """
output "cluster_id" { value = local.cluster_id }
output "dashboard_url" { value = local.dashboard_url }
output "grants" {
  value = {
    function  = { for key, role in local.function_roles : key => { project = local.role_projects[key], role = role } }
    hpa_floor = { for key, role in local.hpa_floor_roles : key => { project = local.role_projects[key], role = role } }
  }
}
output "function_environment" { value = local.function_environment }
output "hpa_floor_environment" { value = var.hpa_floor_enabled ? local.hpa_floor_environment : null }
output "config" { value = jsondecode(local.config_json) }
output "firestore_document" { value = local.firestore_document }
output "surges" { value = local.surges }
output "replaces" { value = local.replaces }
"""
ROOT_OUTPUTS = """
output "clusters" { value = module.cluster }
output "custom_roles_needed" { value = keys(local.custom_roles_needed) }
"""

ONE_CLUSTER = (
    'cluster = { name = "main", location = "europe-west1" }, config = { nodePools = { a = { enabled = true } } }'
)


def _replaced(text: str, stand_ins: dict[str, str], where: str) -> str:
    for original, stand_in in stand_ins.items():
        assert original in text, f"{where} no longer reads {original!r}: update the stand-ins of this test"
        text = text.replace(original, stand_in)
    return text


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("the terraform command is not installed: the offline evaluation of the variables cannot run")
    directory = tmp_path_factory.mktemp("terraform-offline")
    module = directory / "modules" / "node-compactor"
    module.mkdir(parents=True)
    shutil.copy(ROOT_DIR / "variables.tf", directory / "variables.tf")
    shutil.copy(MODULE_DIR / "variables.tf", module / "variables.tf")
    root_main = _replaced(
        (ROOT_DIR / "main.tf").read_text(), {PROVIDER_BLOCK: "", **ROOT_STAND_INS}, "terraform/main.tf"
    )
    (directory / "main.tf").write_text(root_main + ROOT_OUTPUTS)
    module_main = _replaced((MODULE_DIR / "main.tf").read_text(), MODULE_STAND_INS, "modules/node-compactor/main.tf")
    (module / "main.tf").write_text(module_main + _grant_locals() + MODULE_OUTPUTS)
    _terraform(directory, "init", "-input=false", "-backend=false")
    return directory


def _grant_locals() -> str:
    """The module's iam.tf locals that say which role each account gets and in which project (the first
    locals block: it reads only variables and other locals)."""
    iam = (MODULE_DIR / "iam.tf").read_text()
    start = iam.index("\nlocals {\n")
    block = iam[start : iam.index("\n}\n", start) + 3]
    assert "role_projects" in block, "modules/node-compactor/iam.tf's first locals block no longer holds role_projects"
    return block


def _terraform(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "TF_IN_AUTOMATION": "1", "TF_CLI_CONFIG_FILE": os.devnull}
    return subprocess.run(
        ["terraform", f"-chdir={directory}", *arguments, "-no-color"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def apply(scratch: Path, tfvars: str) -> dict[str, Any]:
    """The `clusters` output after applying these variables, or an AssertionError with Terraform's message."""
    (scratch / "test.tfvars").write_text(tfvars)
    for state in scratch.glob("terraform.tfstate*"):
        state.unlink()
    applied = _terraform(scratch, "apply", "-auto-approve", "-input=false", "-var-file=test.tfvars")
    assert applied.returncode == 0, applied.stderr
    output = _terraform(scratch, "output", "-json", "clusters")
    clusters: dict[str, Any] = json.loads(output.stdout)
    return clusters


def roles_created(scratch: Path) -> set[str]:
    """The custom roles the last apply needs, as PROJECT/ROLE."""
    return set(json.loads(_terraform(scratch, "output", "-json", "custom_roles_needed").stdout))


def refused(scratch: Path, tfvars: str) -> str:
    (scratch / "test.tfvars").write_text(tfvars)
    planned = _terraform(scratch, "plan", "-input=false", "-var-file=test.tfvars")
    assert planned.returncode != 0, "Terraform accepted variables it should refuse"
    return " ".join(planned.stderr.replace("│", " ").split())


def with_project(clusters: str) -> str:
    return f'project_id = "my-project"\nregion = "europe-west1"\nclusters = {clusters}\n'


# --- the example files --------------------------------------------------------------


def test_the_single_cluster_example_renders_a_dry_run_configuration_for_one_function(scratch: Path) -> None:
    clusters = apply(scratch, (ROOT_DIR / "terraform.tfvars.example").read_text())

    assert list(clusters) == ["production"]
    production = clusters["production"]
    environment = production["function_environment"]
    assert environment["COMPACTOR_CLUSTER"] == "projects/my-project/locations/europe-west1/clusters/production"
    assert environment["COMPACTOR_ENDPOINT_MODE"] == "dns"
    assert json.loads(environment["COMPACTOR_CONFIG"]) == production["config"]
    assert production["config"]["dryRun"] is True
    assert production["config"]["nodePools"]["default-pool"]["scaleDownCPURequestRatioLimit"] == 0.75
    assert production["hpa_floor_environment"] is None


def test_the_fleet_example_gives_each_cluster_its_own_settings(scratch: Path) -> None:
    clusters = apply(scratch, (ROOT_DIR / "fleet.tfvars.example").read_text())

    assert set(clusters) == {"shop-eu", "batch", "payments", "analytics"}
    assert clusters["shop-eu"]["config"]["dryRun"] is False
    assert clusters["batch"]["config"]["dryRun"] is True
    assert clusters["batch"]["config"]["skipNodesWithLocalStorage"] is False
    assert clusters["payments"]["function_environment"]["COMPACTOR_ENDPOINT_MODE"] == "private-ip"
    assert clusters["batch"]["function_environment"]["COMPACTOR_CLUSTER"].endswith(
        "/locations/europe-west1-b/clusters/batch"
    )
    hpa_floor = clusters["shop-eu"]["hpa_floor_environment"]
    assert hpa_floor["MINIMUM_REPLICAS_LOWER_BOUND"] == "3"
    assert hpa_floor["COMPACTOR_RUN_BUDGET_SECONDS"] == "40"
    assert hpa_floor["COMPACTOR_CLUSTER"] == clusters["shop-eu"]["function_environment"]["COMPACTOR_CLUSTER"]
    assert "PROMETHEUS_SERVER_URL" not in hpa_floor
    analytics = clusters["analytics"]
    assert analytics["function_environment"]["COMPACTOR_CLUSTER"] == (
        "projects/my-data-project/locations/europe-west1/clusters/analytics"
    )
    assert analytics["grants"]["function"]["cluster"]["project"] == "my-data-project"
    assert roles_created(scratch) == {
        "my-project/cluster",
        "my-project/hpa_floor",
        "my-project/prometheus",
        "my-data-project/cluster",
    }


# --- what a cluster entry turns into ----------------------------------------------------


def test_nulls_in_the_configuration_are_left_out_and_absent_settings_take_the_module_defaults(scratch: Path) -> None:
    clusters = apply(
        scratch,
        with_project(
            '{ main = { cluster = { name = "main", location = "europe-west1" }, dry_run = null, '
            "config = { poolLabel = null, nodePools = { a = { enabled = true, minNodes = null } } } } }"
        ),
    )

    main = clusters["main"]
    assert main["config"] == {
        "nodePools": {"a": {"enabled": True}},
        "placeholderNamespace": "node-compactor",
        "dryRun": False,
    }
    assert main["function_environment"]["COMPACTOR_RUN_BUDGET_SECONDS"] == "240"
    assert main["function_environment"]["COMPACTOR_LEASE_NAMESPACE"] == "kube-system"
    assert main["firestore_document"] == "node-compactor/nc-main"


def test_firestore_clusters_each_read_their_own_document(scratch: Path) -> None:
    clusters = apply(
        scratch,
        with_project(
            f'{{ alpha = {{ {ONE_CLUSTER}, config_source = "firestore" }}, '
            f'b = {{ {ONE_CLUSTER}, config_source = "firestore", name = "compactor-b" }} }}'
        ),
    )

    documents = {
        key: cluster["function_environment"]["COMPACTOR_FIRESTORE_DOCUMENT"] for key, cluster in clusters.items()
    }
    assert documents == {"alpha": "node-compactor/nc-alpha", "b": "node-compactor/compactor-b"}
    assert "COMPACTOR_CONFIG" not in clusters["alpha"]["function_environment"]


def test_the_surge_permissions_follow_the_pools_that_opt_in_unless_the_cluster_says_otherwise(scratch: Path) -> None:
    location = 'cluster = { name = "main", location = "europe-west1" }'
    opted_in = "config = { nodePools = { a = { enabled = true, surgeSingleReplicas = true } } }"
    disabled_pool = "config = { nodePools = { a = { enabled = false, surgeSingleReplicas = true } } }"
    clusters = apply(
        scratch,
        with_project(
            f"{{ plain = {{ {ONE_CLUSTER} }}, opted = {{ {location}, {opted_in} }}, "
            f"off = {{ {location}, {disabled_pool} }}, "
            f"said = {{ {ONE_CLUSTER}, surge_single_replicas = true }}, "
            f"refused = {{ {location}, {opted_in}, surge_single_replicas = false }} }}"
        ),
    )
    assert {key: cluster["surges"] for key, cluster in clusters.items()} == {
        "plain": False,
        "opted": True,
        "off": False,
        "said": True,
        "refused": False,
    }
    assert "my-project/surge" in roles_created(scratch)
    only_rbac = f'{{ opted = {{ {location}, {opted_in}, access_mode = "rbac" }}, plain = {{ {ONE_CLUSTER} }} }}'
    apply(scratch, with_project(only_rbac))
    assert "my-project/surge" not in roles_created(scratch)


def test_node_replacement_follows_the_pools_that_enable_it_and_its_namespace_reaches_the_configuration(
    scratch: Path,
) -> None:
    location = 'cluster = { name = "main", location = "europe-west1" }'
    replacing = (
        "config = { nodePools = { big = { enabled = true, "
        'replacement = { enabled = true, targetPools = ["small"] } }, small = {} } }'
    )
    disabled_pool = "config = { nodePools = { big = { enabled = false, replacement = { enabled = true } } } }"
    clusters = apply(
        scratch,
        with_project(
            f"{{ plain = {{ {ONE_CLUSTER} }}, replacing = {{ {location}, {replacing}, "
            'placeholder_namespace = "compactor-placeholders" }, '
            f"off = {{ {location}, {disabled_pool} }}, "
            f"said = {{ {ONE_CLUSTER}, node_replacement = true }}, "
            f"refused = {{ {location}, {replacing}, node_replacement = false }} }}"
        ),
    )
    assert {key: cluster["replaces"] for key, cluster in clusters.items()} == {
        "plain": False,
        "replacing": True,
        "off": False,
        "said": True,
        "refused": False,
    }
    assert clusters["replacing"]["config"]["placeholderNamespace"] == "compactor-placeholders"
    assert clusters["plain"]["config"]["placeholderNamespace"] == "node-compactor"
    # The same namespace written in config too is accepted (one that differs is refused below).
    same = '{ main = { cluster = { name = "main", location = "europe-west1" }, placeholder_namespace = "ops-nc", '
    same += 'config = { placeholderNamespace = "ops-nc", nodePools = { a = { enabled = true } } } } }'
    assert apply(scratch, with_project(same))["main"]["config"]["placeholderNamespace"] == "ops-nc"


def test_the_replacement_manifest_is_filled_in_with_each_clusters_account_and_placeholder_namespace(
    tmp_path: Path,
) -> None:
    """The root's replacement_manifests output, as written in outputs.tf, evaluated by Terraform over stand-in
    deployments: the account and the namespace are filled in, nothing else changes."""
    if shutil.which("terraform") is None:
        pytest.skip("the terraform command is not installed")
    outputs = (ROOT_DIR / "outputs.tf").read_text()
    start = outputs.index('output "replacement_manifests" {')
    block = outputs[start : outputs.index("\n}\n", start) + 3]
    pattern = re.search(r'placeholder_namespace_pattern = ("[^"\n]*")', outputs)
    assert pattern is not None
    template = REPO_ROOT / "deploy" / "replacement.yaml"
    deployments = "".join(
        f'    {key} = {{ function_service_account_email = "nc-{key}@p.iam.gserviceaccount.com", '
        f'placeholder_namespace = "{namespace}", node_replacement = {on} }}\n'
        for key, namespace, on in (
            ("main", "node-compactor", "true"),
            ("ops", "ops-nc", "true"),
            ("plain", "x", "false"),
        )
    )
    (tmp_path / "main.tf").write_text(
        "locals {\n"
        f'  replacement_template = file("{template}")\n'
        f"  placeholder_namespace_pattern = {pattern.group(1)}\n"
        '  rbac_placeholder = "FUNCTION_SERVICE_ACCOUNT_EMAIL"\n'
        f"  deployments = {{\n{deployments}  }}\n"
        "}\n" + block
    )
    for arguments in (("init", "-input=false", "-backend=false"), ("apply", "-auto-approve", "-input=false")):
        done = _terraform(tmp_path, *arguments)
        assert done.returncode == 0, done.stderr
    rendered: dict[str, str] = json.loads(_terraform(tmp_path, "output", "-json", "replacement_manifests").stdout)
    assert set(rendered) == {"main", "ops"}
    assert rendered["main"] == template.read_text().replace(
        "FUNCTION_SERVICE_ACCOUNT_EMAIL", "nc-main@p.iam.gserviceaccount.com"
    )
    documents = {document["kind"]: document for document in yaml.safe_load_all(rendered["ops"])}
    assert documents["Namespace"]["metadata"]["name"] == "ops-nc"
    assert documents["Role"]["metadata"]["namespace"] == documents["RoleBinding"]["metadata"]["namespace"] == "ops-nc"
    assert documents["RoleBinding"]["subjects"][0]["name"] == "nc-ops@p.iam.gserviceaccount.com"
    assert documents["PriorityClass"]["metadata"]["name"] == "node-compactor-placeholder"
    assert documents["Role"]["metadata"]["name"] == "node-compactor-placeholders"
    assert documents["Namespace"]["metadata"]["labels"]["app.kubernetes.io/name"] == "node-compactor"


def test_the_dashboard_url_opens_each_clusters_dashboard_in_the_console(scratch: Path) -> None:
    clusters = apply(
        scratch,
        with_project(f"{{ main = {{ {ONE_CLUSTER} }}, quiet = {{ {ONE_CLUSTER}, dashboard_enabled = false }} }}"),
    )

    assert clusters["main"]["dashboard_url"] == (
        "https://console.cloud.google.com/monitoring/dashboards/custom/4815162342108000000?project=my-project"
    )
    assert clusters["quiet"]["dashboard_url"] is None


# --- clusters in other projects ------------------------------------------------------------

CONFIG = "config = { nodePools = { a = { enabled = true } } }"


def test_a_cluster_is_named_by_its_path_or_by_name_location_and_project_in_any_project(scratch: Path) -> None:
    clusters = apply(
        scratch,
        with_project(
            f"{{ home = {{ {ONE_CLUSTER} }}, "
            f'shop = {{ cluster = "projects/shop-prod/locations/europe-west1-b/clusters/shop", {CONFIG} }}, '
            f'data = {{ cluster = {{ name = "lake", location = "us-central1", project = "data-prod" }}, {CONFIG} }}, '
            f'same = {{ cluster = "projects/my-project/locations/europe-west1/clusters/other", {CONFIG} }} }}'
        ),
    )

    paths = {key: cluster["function_environment"]["COMPACTOR_CLUSTER"] for key, cluster in clusters.items()}
    assert paths == {
        "home": "projects/my-project/locations/europe-west1/clusters/main",
        "shop": "projects/shop-prod/locations/europe-west1-b/clusters/shop",
        "data": "projects/data-prod/locations/us-central1/clusters/lake",
        "same": "projects/my-project/locations/europe-west1/clusters/other",
    }
    assert {key: cluster["cluster_id"] for key, cluster in clusters.items()} == paths


def test_each_account_is_granted_in_its_clusters_project_the_roles_of_that_project(scratch: Path) -> None:
    clusters = apply(
        scratch,
        with_project(
            f"{{ home = {{ {ONE_CLUSTER} }}, "
            f'shop = {{ cluster = "projects/shop-prod/locations/europe-west1/clusters/shop", {CONFIG}, '
            'config_source = "firestore", hpa_floor_enabled = true } }'
        ),
    )

    assert clusters["home"]["grants"]["function"] == {
        "cluster": {"project": "my-project", "role": "projects/my-project/roles/node_compactor"},
    }
    shop = clusters["shop"]["grants"]
    assert shop["function"] == {
        "cluster": {"project": "shop-prod", "role": "projects/shop-prod/roles/node_compactor"},
        # The configuration document stays in the function's project, with its database.
        "firestore": {"project": "my-project", "role": "projects/my-project/roles/node_compactor_firestore"},
    }
    assert shop["hpa_floor"] == {
        "hpa_floor": {"project": "shop-prod", "role": "projects/shop-prod/roles/node_compactor_hpa_floor"},
        "firestore": {"project": "my-project", "role": "projects/my-project/roles/node_compactor_firestore"},
        # Managed Prometheus is queried in the cluster's project (compactor/hpa/service.py).
        "prometheus": {"project": "shop-prod", "role": "projects/shop-prod/roles/node_compactor_prometheus"},
    }


def test_each_project_gets_only_the_custom_roles_its_own_clusters_need(scratch: Path) -> None:
    shop = 'cluster = "projects/shop-prod/locations/europe-west1/clusters/shop"'
    data = 'cluster = "projects/data-prod/locations/europe-west1/clusters/lake"'
    apply(
        scratch,
        with_project(
            f'{{ home = {{ {ONE_CLUSTER}, access_mode = "rbac" }}, '
            f'shop = {{ {shop}, {CONFIG}, surge_single_replicas = true, config_source = "firestore" }}, '
            f'shop2 = {{ {shop}, {CONFIG}, name = "nc-shop-two", hpa_floor_enabled = true }}, '
            f'data = {{ {data}, {CONFIG}, access_mode = "rbac", hpa_floor_enabled = true, '
            'hpa_floor_prometheus_server_url = "http://prometheus.monitoring:9090" } }'
        ),
    )

    assert roles_created(scratch) == {
        # home and data use RBAC and no Managed Prometheus: no role in their projects but Firestore's.
        "my-project/firestore",
        "shop-prod/cluster",
        "shop-prod/surge",
        "shop-prod/hpa_floor",
        "shop-prod/prometheus",
    }


def test_a_single_cluster_in_the_functions_project_needs_one_custom_role_there(scratch: Path) -> None:
    apply(scratch, (ROOT_DIR / "terraform.tfvars.example").read_text())
    assert roles_created(scratch) == {"my-project/cluster"}


def test_the_hpa_floor_passes_its_prometheus_settings_under_estafettes_names(scratch: Path) -> None:
    clusters = apply(
        scratch,
        with_project(
            f"{{ main = {{ {ONE_CLUSTER}, hpa_floor_enabled = true, hpa_floor_minimum_replicas_lower_bound = 2, "
            'hpa_floor_prometheus_server_url = "http://prometheus.monitoring:9090", '
            'hpa_floor_prometheus_url_allowlist = ["prometheus.monitoring", "thanos.monitoring"] } }'
        ),
    )

    environment = clusters["main"]["hpa_floor_environment"]
    assert environment["MINIMUM_REPLICAS_LOWER_BOUND"] == "2"
    assert environment["PROMETHEUS_SERVER_URL"] == "http://prometheus.monitoring:9090"
    assert environment["PROMETHEUS_URL_ALLOWLIST"] == "prometheus.monitoring,thanos.monitoring"


# --- mistakes Terraform refuses before touching anything ------------------------------------


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        pytest.param("{}", "clusters must map at least one key", id="no-cluster"),
        pytest.param(
            f"{{ main = {{ {ONE_CLUSTER}, dryrun = true }} }}",
            "hold a key modules/node-compactor does not take",
            id="misspelt-setting",
        ),
        pytest.param(
            '{ main = { cluster = { name = "main", location = "europe-west1" } } }',
            'Each cluster needs cluster = { name, location } (or "projects/P/locations/L/clusters/C") and config',
            id="no-config",
        ),
        pytest.param(
            f"{{ Main = {{ {ONE_CLUSTER} }} }}", "Each key of clusters must be lowercase", id="key-not-a-name"
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, endpoint_mode = "public" }} }}',
            'endpoint_mode must be "dns", "ip" or "private-ip"',
            id="unknown-endpoint-mode",
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, endpoint_mode = "private-ip" }} }}',
            'endpoint_mode "private-ip" needs vpc_connector or direct_vpc_egress',
            id="private-ip-without-a-way-into-the-vpc",
        ),
        pytest.param(
            f"{{ main = {{ {ONE_CLUSTER}, run_budget_seconds = 400 }} }}",
            "less than function_timeout_seconds",
            id="budget-beyond-the-timeout",
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, invoker_members = ["allUsers"] }} }}',
            "public and domain-wide access is not allowed",
            id="public-invoker",
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, hpa_floor_prometheus_url_allowlist = ["https://evil.example/x"] }} }}',
            "must be a host or host:port, without scheme or path",
            id="allowlist-entry-with-a-scheme",
        ),
        pytest.param(
            f"{{ ab = {{ {ONE_CLUSTER} }} }}",
            "A cluster without a name needs a key of 3-17",
            id="key-too-short-for-a-name",
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, name = "a-name-far-too-long-for-accounts" }} }}',
            "name must be 6-20 lowercase letters",
            id="name-too-long-for-a-service-account",
        ),
        pytest.param(
            f'{{ main = {{ cluster = "projects/123456/locations/europe-west1/clusters/main", {CONFIG} }} }}',
            'not: main = "projects/123456/locations/europe-west1/clusters/main"',
            id="cluster-path-with-a-project-number",
        ),
        pytest.param(
            f'{{ main = {{ cluster = "shop-prod/europe-west1/main", {CONFIG} }} }}',
            "must be projects/PROJECT_ID/locations/LOCATION/clusters/NAME, with a project ID (6-30 lowercase letters, "
            'digits or hyphens), a region or zone and a GKE cluster name; not: main = "shop-prod/europe-west1/main"',
            id="cluster-path-of-another-form",
        ),
        pytest.param(
            f'{{ main = {{ cluster = "projects/shop-prod/zones/europe-west1-b/clusters/main", {CONFIG} }} }}',
            'not: main = "projects/shop-prod/zones/europe-west1-b/clusters/main"',
            id="cluster-path-with-zones",
        ),
        pytest.param(
            f'{{ main = {{ cluster = {{ name = "main", location = "europe-west1", project = "Shop Prod" }}, '
            f"{CONFIG} }} }}",
            "cluster.project must be a project ID (6-30 lowercase letters, digits or hyphens), not a project number or "
            'name; not: main = "Shop Prod"',
            id="cluster-project-not-an-id",
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, placeholder_namespace = "kube-system" }} }}',
            "placeholder_namespace must be a namespace of its own",
            id="placeholders-in-kube-system",
        ),
        pytest.param(
            f'{{ main = {{ {ONE_CLUSTER}, placeholder_namespace = "Placeholders" }} }}',
            "placeholder_namespace must be a Kubernetes namespace name",
            id="placeholder-namespace-not-a-name",
        ),
        pytest.param(
            '{ main = { cluster = { name = "main", location = "europe-west1" }, '
            'config = { placeholderNamespace = "elsewhere", nodePools = { a = { enabled = true } } } } }',
            "config.placeholderNamespace differs from placeholder_namespace",
            id="placeholder-namespace-twice",
        ),
    ],
)
def test_terraform_refuses_a_mistake_naming_it(scratch: Path, clusters: str, message: str) -> None:
    assert message in refused(scratch, with_project(clusters))
