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
    "local.custom_roles": (
        '{ cluster = "cluster-role", surge = "surge-role", firestore = "firestore-role", hpa_floor = "hpa-role", '
        'prometheus = "prom-role" }'
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
}
PROVIDER_BLOCK = """provider "google" {
  project        = var.project_id
  region         = var.region
  default_labels = var.labels
}
"""

MODULE_OUTPUTS = """
output "function_environment" { value = local.function_environment }
output "hpa_floor_environment" { value = var.hpa_floor_enabled ? local.hpa_floor_environment : null }
output "config" { value = jsondecode(local.config_json) }
output "firestore_document" { value = local.firestore_document }
output "surges" { value = local.surges }
output "replaces" { value = local.replaces }
"""
ROOT_OUTPUTS = """
output "clusters" { value = module.cluster }
output "any_surge_on_iam" { value = local.any_surge_on_iam }
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
    (module / "main.tf").write_text(module_main + MODULE_OUTPUTS)
    _terraform(directory, "init", "-input=false", "-backend=false")
    return directory


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

    assert set(clusters) == {"shop-eu", "batch", "payments"}
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
    assert json.loads(_terraform(scratch, "output", "-json", "any_surge_on_iam").stdout) is True
    only_rbac = f'{{ opted = {{ {location}, {opted_in}, access_mode = "rbac" }}, plain = {{ {ONE_CLUSTER} }} }}'
    apply(scratch, with_project(only_rbac))
    assert json.loads(_terraform(scratch, "output", "-json", "any_surge_on_iam").stdout) is False


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
            "Each cluster needs cluster = { name, location } and config",
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
