"""The API calls the functions really make, held against `compactor/permissions.py` both ways.

Each job in JOBS runs against the fake API server the way the suite's live runs do (the
compactor on `light_cluster`: marks, a drain with its evictions and Events, steering's pod
patches, the Lease taken, renewed and given back, then a second run; node replacement asking
for a node with a placeholder pod and deleting it when no node came; the HPA floor raising a
floor with the rollout check), and every request it made is read in RBAC terms
(`tests.fakeapi.calls`). Then:

- every call is granted by the job's RBAC rules, namespace and object name included (the
  Lease rules hold in the Lease namespace only, get and update on the job's own Lease only;
  the placeholder rules in the placeholder namespace only), and by its IAM permissions, where
  the rules IAM cannot confine to a namespace (PLACEHOLDER_RBAC_RULES) come from RBAC in
  either access mode;
- every verb an RBAC rule grants, and every Kubernetes IAM permission, is used by some call
  (a job that only adds rules to another, such as node replacement, uses every verb of the
  rules it adds; the other job's tour uses the rest).

Each is run with the default namespaces and with others, so that a rule holding in the wrong
namespace shows.

A new job (`cleanup`, say) is a row in JOBS with its rules and a tour of its calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest

from compactor import permissions
from compactor.core.model import PLACEHOLDER_LABEL
from compactor.hpa.model import ROLLOUT_CHECK, SCALE_DOWN_MAX_RATIO
from compactor.permissions import RbacRule
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.fakeapi.calls import ApiCall, api_calls
from tests.fakeprometheus import running
from tests.hpa.conftest import min_replicas, run_hpa, scaled_hpa
from tests.integration.conftest import (
    MARKED,
    POOL_CONFIG,
    TOKEN,
    cordoned,
    env_with,
    later,
    light_cluster,
    run_once,
)


@dataclass(frozen=True)
class Namespaces:
    lease: str
    placeholder: str

    def __str__(self) -> str:
        return f"lease-{self.lease}-placeholders-{self.placeholder}"


DEFAULT_NAMESPACES = Namespaces(permissions.DEFAULT_LEASE_NAMESPACE, permissions.DEFAULT_PLACEHOLDER_NAMESPACE)
NAMESPACES = [DEFAULT_NAMESPACES, Namespaces("node-compactor-ops", "compactor-placeholders")]

# GKE's IAM name of each kind the functions touch (`container.<name>.<verb>`).
IAM_KINDS = {
    ("", "nodes"): "nodes",
    ("", "pods"): "pods",
    ("", "events"): "events",
    ("policy", "poddisruptionbudgets"): "podDisruptionBudgets",
    ("coordination.k8s.io", "leases"): "leases",
    ("autoscaling", "horizontalpodautoscalers"): "horizontalPodAutoscalers",
    ("apps", "replicasets"): "replicaSets",
    ("apps", "deployments"): "deployments",
    ("", "persistentvolumeclaims"): "persistentVolumeClaims",
    # GKE names the permissions of every custom resource (a CRD's objects) container.thirdPartyObjects.*.
    ("cloud.google.com", "computeclasses"): "thirdPartyObjects",
}
# GKE authorizes a patch with the `update` permission; an eviction has a permission of its own.
IAM_VERBS = {"patch": "update"}
IAM_SUBRESOURCES = {("pods", "eviction", "create"): "container.pods.evict"}
# Permissions of the GKE API, not of the Kubernetes API: `compactor/gcp/gke.py` uses them to find the
# cluster and connect; the fake API server cannot see them.
GKE_API_PERMISSIONS = frozenset({"container.clusters.get", "container.clusters.connect"})


def watched_light_cluster(api: FakeApiServer) -> None:
    """The light cluster, n1 holding enough pods that a drain's later batches are proven on watches (the
    query's `watch=True`, as the Python client writes it, is kube-apiserver's watch verb)."""
    light_cluster(api)
    for index in range(3, 21):
        api.add(k8s.pod(f"web-a{index}", node="n1", cpu="10m"))
    api.serve_watches("on")
    api.watch_bookmarks(0.2)


def compactor_tour(api: FakeApiServer, namespaces: Namespaces) -> None:
    watched_light_cluster(api)
    env = env_with(COMPACTOR_LEASE_NAMESPACE=namespaces.lease)
    assert run_once(api, env=env).report["decision"]["action"] == "drain"
    assert cordoned(api, "n1")
    run_once(api, env=env, at=later(60))


def surge_tour(api: FakeApiServer, namespaces: Namespaces) -> None:
    """The compactor's tour with a pool that sets surgeSingleReplicas: n1 also holds a Deployment's only pod."""
    watched_light_cluster(api)
    for obj in k8s.deployment("api", nodes=["n1"]):
        api.add(obj)
    config = {"nodePools": {"default-pool": {**POOL_CONFIG, "surgeSingleReplicas": True}}}
    env = env_with(config, COMPACTOR_LEASE_NAMESPACE=namespaces.lease)
    result = run_once(api, env=env)
    assert result.report["decision"]["restarts"], "the tour restarts a Deployment"
    assert cordoned(api, "n1")
    run_once(api, env=env, at=later(60))


def replacement_tour(api: FakeApiServer, namespaces: Namespaces) -> None:
    """b1 of big-pool (0.40 an hour) is marked and has waited as replaceable; its pods fit on b2 and one new
    small-pool node (0.13 an hour).
    The first run creates the placeholder that asks the autoscaler for that node; none comes, and the run
    after timeoutSeconds deletes it (tests/integration/test_replacement.py has the whole story)."""
    for name, marked in (("b1", MARKED), ("b2", None)):
        annotations = (
            {"node-compactor.dev/underutilized-since": marked, "node-compactor.dev/replaceable-since": marked}
            if marked
            else {}
        )
        api.add(
            k8s.node(
                name, cpu="8", memory="32Gi", pool="big-pool", machine_type="n2-standard-8", annotations=annotations
            )
        )
        for index in range(4):
            api.add(k8s.pod(f"web{name[-1]}-{index}", node=name, cpu="1200m", memory="1Gi"))
    api.add(k8s.node("s1", pool="small-pool"))
    api.add(k8s.pod("small-0", node="s1", cpu="2"))
    replacement = {"enabled": True, "targetPools": ["small-pool"], "timeoutSeconds": 600}
    config = {
        "nodePools": {
            "big-pool": {**POOL_CONFIG, "pricePerHour": 0.40, "replacement": replacement},
            "small-pool": {"pricePerHour": 0.13},
        },
        "placeholderNamespace": namespaces.placeholder,
    }
    env = env_with(config, COMPACTOR_LEASE_NAMESPACE=namespaces.lease)
    assert run_once(api, env=env).report["outcome"]["placeholdersCreated"], "the tour creates a placeholder"
    assert placeholders(api, namespaces.placeholder), f"the placeholder is in {namespaces.placeholder}"
    assert run_once(api, env=env, at=later(601)).report["outcome"]["placeholdersDeleted"], "and deletes it"
    assert placeholders(api, namespaces.placeholder) == []


def placeholders(api: FakeApiServer, namespace: str) -> list[str]:
    return [
        pod["metadata"]["name"]
        for pod in api.objects("Pod", namespace)
        if (pod["metadata"].get("labels") or {}).get(PLACEHOLDER_LABEL) == "true"
    ]


def hpa_floor_tour(api: FakeApiServer, namespaces: Namespaces) -> None:
    annotations = {SCALE_DOWN_MAX_RATIO: "0.2", ROLLOUT_CHECK: "true"}
    api.add(scaled_hpa(annotations=annotations, current_replicas=20, min_replicas=2))
    api.add(k8s.replica_set("web-new22", deployment="web", replicas=20))
    with running() as prom:
        run_hpa(api, prom, COMPACTOR_LEASE_NAMESPACE=namespaces.lease)
    assert min_replicas(api) > 2


@dataclass(frozen=True)
class Job:
    name: str
    rbac: tuple[RbacRule, ...]  # what access_mode "rbac" grants it
    iam: tuple[str, ...] | None  # None: the job has no IAM role of its own
    tour: Callable[[FakeApiServer, Namespaces], None]
    # Rules granted by RBAC in either access mode, because IAM cannot confine them to a namespace.
    rbac_in_iam_mode: tuple[RbacRule, ...] = ()
    # A job that adds rules to another job's: only the added rules (and IAM permissions) must all be used
    # by its tour, the other job's tour uses the rest. None: every rule and permission of the job.
    adds: tuple[tuple[RbacRule, ...], tuple[str, ...]] | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def rules_to_use(self) -> tuple[RbacRule, ...]:
        return self.rbac if self.adds is None else self.adds[0]

    @property
    def iam_to_use(self) -> tuple[str, ...]:
        return (self.iam or ()) if self.adds is None else self.adds[1]


JOBS = [
    Job("compactor", permissions.RBAC_RULES, permissions.IAM_PERMISSIONS, compactor_tour),
    Job(
        "compactor-surge",
        permissions.RBAC_RULES + permissions.SURGE_RBAC_RULES,
        permissions.IAM_PERMISSIONS + permissions.SURGE_IAM_PERMISSIONS,
        surge_tour,
    ),
    Job(
        "compactor-replacement",
        permissions.RBAC_RULES + permissions.PLACEHOLDER_RBAC_RULES,
        permissions.IAM_PERMISSIONS,
        replacement_tour,
        rbac_in_iam_mode=permissions.PLACEHOLDER_RBAC_RULES,
        adds=(permissions.PLACEHOLDER_RBAC_RULES, ()),
    ),
    Job("hpa-floor", permissions.HPA_FLOOR_RBAC_RULES, permissions.HPA_FLOOR_IAM_PERMISSIONS, hpa_floor_tour),
]
BY_NAME = {job.name: job for job in JOBS}


@functools.cache
def recorded(job_name: str, namespaces: Namespaces) -> tuple[ApiCall, ...]:
    with FakeApiServer(token=TOKEN) as api:
        BY_NAME[job_name].tour(api, namespaces)
        return tuple(api_calls(api.requests))


def grants(rule: RbacRule, call: ApiCall, namespaces: Namespaces) -> bool:
    return (
        (rule.api_group, rule.resource) == (call.group, call.rbac_resource)
        and call.verb in rule.verbs
        and (not rule.resource_names or call.name in rule.resource_names)
        and (not rule.lease_namespace or call.namespace == namespaces.lease)
        and (not rule.placeholder_namespace or call.namespace == namespaces.placeholder)
    )


def ungranted(calls: Iterable[ApiCall], rules: Iterable[RbacRule], namespaces: Namespaces) -> list[str]:
    rules = tuple(rules)
    return sorted({str(call) for call in calls if not any(grants(rule, call, namespaces) for rule in rules)})


def unused(calls: Iterable[ApiCall], rules: Iterable[RbacRule], namespaces: Namespaces) -> list[str]:
    calls = tuple(calls)
    return [
        f"{verb} {rule}"
        for rule in rules
        for verb in rule.verbs
        if not any(call.verb == verb and grants(rule, call, namespaces) for call in calls)
    ]


def iam_permission(call: ApiCall) -> str:
    special = IAM_SUBRESOURCES.get((call.resource, call.subresource or "", call.verb))
    if special is not None:
        return special
    kind = IAM_KINDS.get((call.group, call.resource))
    assert kind is not None and call.subresource is None, f"{call}: add its GKE IAM name to IAM_KINDS"
    return f"container.{kind}.{IAM_VERBS.get(call.verb, call.verb)}"


jobs = pytest.mark.parametrize("job", [pytest.param(job, id=job.name) for job in JOBS])
where = pytest.mark.parametrize("namespaces", [pytest.param(n, id=str(n)) for n in NAMESPACES])


@jobs
@where
def test_every_call_a_job_makes_is_granted_by_its_rbac_rules(job: Job, namespaces: Namespaces) -> None:
    calls = recorded(job.name, namespaces)
    assert calls, f"the {job} tour made no call"
    assert not [call for call in calls if not call.resource], "a call outside the resource paths (discovery)"
    assert ungranted(calls, job.rbac, namespaces) == []


@jobs
@where
def test_every_verb_a_jobs_rbac_rules_grant_is_used(job: Job, namespaces: Namespaces) -> None:
    assert unused(recorded(job.name, namespaces), job.rules_to_use, namespaces) == []


@jobs
@where
def test_every_call_a_job_makes_is_granted_by_its_iam_permissions_and_each_is_used(
    job: Job, namespaces: Namespaces
) -> None:
    if job.iam is None:
        pytest.skip(f"the {job} job has no IAM role of its own")
    calls = recorded(job.name, namespaces)
    by_iam = [call for call in calls if not any(grants(rule, call, namespaces) for rule in job.rbac_in_iam_mode)]
    needed = {iam_permission(call) for call in by_iam}
    declared = set(job.iam) - GKE_API_PERMISSIONS
    assert sorted(needed - declared) == [], "calls the IAM role does not allow"
    assert sorted(set(job.iam_to_use) - GKE_API_PERMISSIONS - needed) == [], "IAM permissions no call uses"


def test_the_placeholder_pods_are_written_through_the_rules_iam_never_holds() -> None:
    """In iam mode the placeholder's create and delete come from the Role of deploy/replacement.yaml: IAM has no
    permission that could hold them in one namespace, and the custom role never gets container.pods.create."""
    calls = recorded("compactor-replacement", DEFAULT_NAMESPACES)
    writes = [call for call in calls if call.resource == "pods" and call.verb in ("create", "delete")]
    assert {call.verb for call in writes} == {"create", "delete"}
    assert {call.namespace for call in writes} == {permissions.DEFAULT_PLACEHOLDER_NAMESPACE}
    assert ungranted(writes, permissions.PLACEHOLDER_RBAC_RULES, DEFAULT_NAMESPACES) == []
    for forbidden in ("container.pods.create", "container.pods.delete"):
        assert forbidden not in permissions.IAM_PERMISSIONS + permissions.SURGE_IAM_PERMISSIONS


def test_the_lease_rules_refuse_another_controllers_lease_and_another_namespace() -> None:
    """The comparison is not vacuous: what the Lease rules must refuse, they refuse."""

    def call(verb: str, name: str | None, namespace: str) -> ApiCall:
        return ApiCall(verb, "coordination.k8s.io", "leases", None, namespace, name, "")

    refused = [
        call("get", "kube-scheduler", "kube-system"),
        call("update", "cluster-autoscaler", "kube-system"),
        call("update", "node-compactor-hpa", "kube-system"),
        call("create", None, "default"),
        call("get", "node-compactor", "default"),
        ApiCall("update", "", "nodes", None, None, "n1", ""),
        ApiCall("get", "policy", "poddisruptionbudgets", None, "default", "web", ""),
    ]
    assert ungranted(refused, permissions.RBAC_RULES, DEFAULT_NAMESPACES) == sorted(str(c) for c in refused)
    allowed = [call("create", None, "kube-system"), call("update", "node-compactor", "kube-system")]
    assert ungranted(allowed, permissions.RBAC_RULES, DEFAULT_NAMESPACES) == []


def test_the_placeholder_rules_refuse_pod_writes_outside_the_placeholder_namespace() -> None:
    """The comparison is not vacuous: a pod created or deleted anywhere else, or evicted, is refused."""
    rules = permissions.RBAC_RULES + permissions.PLACEHOLDER_RBAC_RULES

    def pod(verb: str, namespace: str, name: str | None = None) -> ApiCall:
        return ApiCall(verb, "", "pods", None, namespace, name, "")

    refused = [
        pod("create", "default"),
        pod("create", "kube-system"),
        pod("delete", "default", "web-1"),
        pod("delete", "kube-system", "node-compactor-placeholder-0123456789"),
        pod("deletecollection", permissions.DEFAULT_PLACEHOLDER_NAMESPACE),
        pod("update", permissions.DEFAULT_PLACEHOLDER_NAMESPACE, "node-compactor-placeholder-0123456789"),
    ]
    assert ungranted(refused, rules, DEFAULT_NAMESPACES) == sorted(str(c) for c in refused)
    allowed = [
        pod("create", permissions.DEFAULT_PLACEHOLDER_NAMESPACE),
        pod("delete", permissions.DEFAULT_PLACEHOLDER_NAMESPACE, "node-compactor-placeholder-0123456789"),
    ]
    assert ungranted(allowed, rules, DEFAULT_NAMESPACES) == []
