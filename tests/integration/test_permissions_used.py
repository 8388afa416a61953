"""The API calls the functions really make, held against `compactor/permissions.py` both ways.

Each job in JOBS runs against the fake API server the way the suite's live runs do (the
compactor on `light_cluster`: marks, a drain with its evictions and Events, steering's pod
patches, the Lease taken, renewed and given back, then a second run; the HPA floor raising a
floor with the rollout check), and every request it made is read in RBAC terms
(`tests.fakeapi.calls`). Then:

- every call is granted by the job's RBAC rules, namespace and object name included (the
  Lease rules hold in the Lease namespace only, get and update on the job's own Lease only),
  and by its IAM permissions;
- every verb an RBAC rule grants, and every Kubernetes IAM permission, is used by some call.

A new job (`cleanup`, say) is a row in JOBS with its rules and a tour of its calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest

from compactor import permissions
from compactor.hpa.model import ROLLOUT_CHECK, SCALE_DOWN_MAX_RATIO
from compactor.permissions import RbacRule
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.fakeapi.calls import ApiCall, api_calls
from tests.fakeprometheus import running
from tests.hpa.conftest import min_replicas, run_hpa, scaled_hpa
from tests.integration.conftest import POOL_CONFIG, TOKEN, cordoned, env_with, later, light_cluster, run_once

LEASE_NAMESPACES = ["kube-system", "node-compactor-ops"]

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


def compactor_tour(api: FakeApiServer, lease_namespace: str) -> None:
    light_cluster(api)
    env = env_with(COMPACTOR_LEASE_NAMESPACE=lease_namespace)
    assert run_once(api, env=env).report["decision"]["action"] == "drain"
    assert cordoned(api, "n1")
    run_once(api, env=env, at=later(60))


def surge_tour(api: FakeApiServer, lease_namespace: str) -> None:
    """The compactor's tour with a pool that sets surgeSingleReplicas: n1 also holds a Deployment's only pod."""
    light_cluster(api)
    for obj in k8s.deployment("api", nodes=["n1"]):
        api.add(obj)
    config = {"nodePools": {"default-pool": {**POOL_CONFIG, "surgeSingleReplicas": True}}}
    env = env_with(config, COMPACTOR_LEASE_NAMESPACE=lease_namespace)
    result = run_once(api, env=env)
    assert result.report["decision"]["restarts"], "the tour restarts a Deployment"
    assert cordoned(api, "n1")
    run_once(api, env=env, at=later(60))


def hpa_floor_tour(api: FakeApiServer, lease_namespace: str) -> None:
    annotations = {SCALE_DOWN_MAX_RATIO: "0.2", ROLLOUT_CHECK: "true"}
    api.add(scaled_hpa(annotations=annotations, current_replicas=20, min_replicas=2))
    api.add(k8s.replica_set("web-new22", deployment="web", replicas=20))
    with running() as prom:
        run_hpa(api, prom, COMPACTOR_LEASE_NAMESPACE=lease_namespace)
    assert min_replicas(api) > 2


@dataclass(frozen=True)
class Job:
    name: str
    rbac: tuple[RbacRule, ...]
    iam: tuple[str, ...] | None  # None: the job has no IAM role of its own
    tour: Callable[[FakeApiServer, str], None]

    def __str__(self) -> str:
        return self.name


JOBS = [
    Job("compactor", permissions.RBAC_RULES, permissions.IAM_PERMISSIONS, compactor_tour),
    Job(
        "compactor-surge",
        permissions.RBAC_RULES + permissions.SURGE_RBAC_RULES,
        permissions.IAM_PERMISSIONS + permissions.SURGE_IAM_PERMISSIONS,
        surge_tour,
    ),
    Job("hpa-floor", permissions.HPA_FLOOR_RBAC_RULES, permissions.HPA_FLOOR_IAM_PERMISSIONS, hpa_floor_tour),
]
BY_NAME = {job.name: job for job in JOBS}


@functools.cache
def recorded(job_name: str, lease_namespace: str) -> tuple[ApiCall, ...]:
    with FakeApiServer(token=TOKEN) as api:
        BY_NAME[job_name].tour(api, lease_namespace)
        return tuple(api_calls(api.requests))


def grants(rule: RbacRule, call: ApiCall, lease_namespace: str) -> bool:
    return (
        (rule.api_group, rule.resource) == (call.group, call.rbac_resource)
        and call.verb in rule.verbs
        and (not rule.resource_names or call.name in rule.resource_names)
        and (not rule.lease_namespace or call.namespace == lease_namespace)
    )


def ungranted(calls: Iterable[ApiCall], rules: Iterable[RbacRule], lease_namespace: str) -> list[str]:
    rules = tuple(rules)
    return sorted({str(call) for call in calls if not any(grants(rule, call, lease_namespace) for rule in rules)})


def unused(calls: Iterable[ApiCall], rules: Iterable[RbacRule], lease_namespace: str) -> list[str]:
    calls = tuple(calls)
    return [
        f"{verb} {rule}"
        for rule in rules
        for verb in rule.verbs
        if not any(call.verb == verb and grants(rule, call, lease_namespace) for call in calls)
    ]


def iam_permission(call: ApiCall) -> str:
    special = IAM_SUBRESOURCES.get((call.resource, call.subresource or "", call.verb))
    if special is not None:
        return special
    kind = IAM_KINDS.get((call.group, call.resource))
    assert kind is not None and call.subresource is None, f"{call}: add its GKE IAM name to IAM_KINDS"
    return f"container.{kind}.{IAM_VERBS.get(call.verb, call.verb)}"


jobs = pytest.mark.parametrize("job", [pytest.param(job, id=job.name) for job in JOBS])
namespaces = pytest.mark.parametrize("lease_namespace", LEASE_NAMESPACES)


@jobs
@namespaces
def test_every_call_a_job_makes_is_granted_by_its_rbac_rules(job: Job, lease_namespace: str) -> None:
    calls = recorded(job.name, lease_namespace)
    assert calls, f"the {job} tour made no call"
    assert not [call for call in calls if not call.resource], "a call outside the resource paths (discovery)"
    assert ungranted(calls, job.rbac, lease_namespace) == []


@jobs
@namespaces
def test_every_verb_a_jobs_rbac_rules_grant_is_used(job: Job, lease_namespace: str) -> None:
    assert unused(recorded(job.name, lease_namespace), job.rbac, lease_namespace) == []


@jobs
def test_every_call_a_job_makes_is_granted_by_its_iam_permissions_and_each_is_used(job: Job) -> None:
    if job.iam is None:
        pytest.skip(f"the {job} job has no IAM role of its own")
    needed = {iam_permission(call) for call in recorded(job.name, LEASE_NAMESPACES[0])}
    declared = set(job.iam) - GKE_API_PERMISSIONS
    assert sorted(needed - declared) == [], "calls the IAM role does not allow"
    assert sorted(declared - needed) == [], "IAM permissions no call uses"


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
    assert ungranted(refused, permissions.RBAC_RULES, "kube-system") == sorted(str(c) for c in refused)
    allowed = [call("create", None, "kube-system"), call("update", "node-compactor", "kube-system")]
    assert ungranted(allowed, permissions.RBAC_RULES, "kube-system") == []
