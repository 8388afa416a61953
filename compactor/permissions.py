"""The one list of what node-compactor is allowed to do, in IAM and in RBAC terms.

The Terraform custom role, the RBAC manifest in `deploy/` and the tests all
check themselves against these lists. Adding an API call to the code means
adding its permission here first; nothing else may grant more.
"""

from __future__ import annotations

from typing import NamedTuple

# Re-exported: where PLACEHOLDER_RBAC_RULES hold unless the configuration names another namespace.
from compactor.settings.config import DEFAULT_PLACEHOLDER_NAMESPACE as DEFAULT_PLACEHOLDER_NAMESPACE

# GKE IAM permissions used by the function when it runs with IAM-only access
# (no RBAC binding): reading the cluster's endpoint and pools, connecting, and
# the Kubernetes verbs below mapped to their `container.*` names (GKE checks a
# patch against `update`). IAM has neither namespaces nor object names: each of
# these holds in every namespace of every cluster in the project, the Lease
# permissions included (docs/deploy.md, "Access modes"; RBAC mode confines them).
IAM_PERMISSIONS: tuple[str, ...] = (
    "container.clusters.get",
    "container.clusters.connect",
    "container.nodes.get",
    "container.nodes.list",
    "container.nodes.watch",  # a drain's later proofs on watches (compactor.kube.watching)
    "container.nodes.update",  # marks, soft taints and the cordon (patches)
    "container.pods.get",
    "container.pods.list",
    "container.pods.watch",
    "container.pods.update",  # the pod-deletion-cost of scale-down steering (a patch)
    "container.pods.evict",
    "container.podDisruptionBudgets.list",
    "container.podDisruptionBudgets.watch",
    # GKE's ComputeClasses (custom resources: GKE names every custom resource's permissions
    # container.thirdPartyObjects.*), read each run for their consolidationThreshold (core.coexistence).
    "container.thirdPartyObjects.list",
    "container.events.create",
    "container.leases.get",
    "container.leases.create",
    "container.leases.update",
)

# Extra IAM permission when the configuration is read from Firestore.
FIRESTORE_IAM_PERMISSIONS: tuple[str, ...] = ("datastore.entities.get",)


class RbacRule(NamedTuple):
    api_group: str
    resource: str
    verbs: tuple[str, ...]
    # When set, the rule allows its verbs on these objects only (RBAC's resourceNames; never for create/list).
    resource_names: tuple[str, ...] = ()
    # True: granted by a Role in the Lease namespace (COMPACTOR_LEASE_NAMESPACE, default kube-system),
    # so in that namespace only; False (and placeholder_namespace False): by the ClusterRole, in every namespace.
    lease_namespace: bool = False
    # True: granted by a Role in the placeholder namespace (`placeholderNamespace`, default node-compactor),
    # so in that namespace only.
    placeholder_namespace: bool = False


# The Leases the two jobs hold for a run (compactor.kube.client.LEASE_NAME, compactor.hpa.cluster.LEASE_NAME).
COMPACTOR_LEASE = "node-compactor"
HPA_FLOOR_LEASE = "node-compactor-hpa"
DEFAULT_LEASE_NAMESPACE = "kube-system"


# The same access as Kubernetes RBAC, for teams that bind a ClusterRole (and a Role for
# the Lease) and give the function only `roles/container.clusterViewer` in IAM.
#
# The Lease: another controller's leader-election Lease must be out of reach, so get
# and update name node-compactor's own Lease, in its namespace only. Create cannot be
# limited by name: the authorizer decides before the new object's name is read, so
# RBAC ignores resourceNames for create ("Referring to resources", Kubernetes RBAC
# docs). It is therefore granted without names, in the Lease namespace only; what it
# allows there is making a Lease that does not exist yet, never changing one.
# watch on nodes, pods and PodDisruptionBudgets: a drain's later batches are proven on the run's read kept
# current by watches (`compactor.kube.watching`); without it each batch is proven on a fresh list.
RBAC_RULES: tuple[RbacRule, ...] = (
    RbacRule("", "nodes", ("get", "list", "watch", "patch")),
    RbacRule("", "pods", ("get", "list", "watch", "patch")),
    RbacRule("", "pods/eviction", ("create",)),
    RbacRule("policy", "poddisruptionbudgets", ("list", "watch")),
    RbacRule("cloud.google.com", "computeclasses", ("list",)),
    RbacRule("", "events", ("create",)),
    RbacRule("coordination.k8s.io", "leases", ("create",), lease_namespace=True),
    RbacRule("coordination.k8s.io", "leases", ("get", "update"), (COMPACTOR_LEASE,), lease_namespace=True),
)

# Node replacement (DESIGN "Node replacement", `compactor.actuation.placeholders`): the compactor creates and
# deletes its placeholder pods, in the placeholder namespace only. It reads them with the pods get and list
# it already holds in every namespace, so this Role adds only the two writes.
#
# A Role in BOTH access modes, never an IAM permission: IAM cannot limit creation to a namespace ("Access
# control", https://cloud.google.com/kubernetes-engine/docs/concepts/access-control), and
# `container.pods.create` on the project would let the function run any pod in every namespace of every
# cluster in the project. GKE allows a request that either IAM or RBAC allows, so the Role completes the
# `iam` mode's custom role as well. Whoever may create pods in a namespace may run them as any of its
# ServiceAccounts: the namespace holds nothing but placeholders (deploy/replacement.yaml creates it, with
# Pod Security "baseline" enforced). Only for clusters where a pool enables replacement
# (deploy/replacement.yaml; Terraform's replacement_manifests).
PLACEHOLDER_RBAC_RULES: tuple[RbacRule, ...] = (RbacRule("", "pods", ("create", "delete"), placeholder_namespace=True),)

# The name of deploy/replacement.yaml's Role and RoleBinding.
PLACEHOLDER_ROLE = "node-compactor-placeholders"

# The HPA floor job (`main.hpa_floor`): read and patch HorizontalPodAutoscalers,
# list ReplicaSets (the rollout check), Events, and its own Lease. Granted only
# when the deployment enables that job.
HPA_FLOOR_IAM_PERMISSIONS: tuple[str, ...] = (
    "container.clusters.get",
    "container.clusters.connect",
    "container.horizontalPodAutoscalers.list",
    "container.horizontalPodAutoscalers.update",
    "container.replicaSets.list",
    "container.events.create",
    "container.leases.get",
    "container.leases.create",
    "container.leases.update",
)

# Querying Google Cloud Managed Service for Prometheus (roles/monitoring.viewer
# carries it; the custom role names only this one).
PROMETHEUS_IAM_PERMISSIONS: tuple[str, ...] = ("monitoring.timeSeries.list",)

# The Lease as for the compactor (see RBAC_RULES): its own name, its namespace only.
HPA_FLOOR_RBAC_RULES: tuple[RbacRule, ...] = (
    RbacRule("autoscaling", "horizontalpodautoscalers", ("list", "patch")),
    RbacRule("apps", "replicasets", ("list",)),
    RbacRule("", "events", ("create",)),
    RbacRule("coordination.k8s.io", "leases", ("create",), lease_namespace=True),
    RbacRule("coordination.k8s.io", "leases", ("get", "update"), (HPA_FLOOR_LEASE,), lease_namespace=True),
)

# Pools with surgeSingleReplicas (`compactor.actuation.surging`): the compactor also lists Deployments, ReplicaSets
# and PersistentVolumeClaims (which pods a rolling restart moves), reads a Deployment again and patches
# its pod template's restartedAt. Granted beside the lists above only when some pool opts in (Terraform
# derives it from the configuration or takes surge_single_replicas; deploy/rbac-surge.yaml in RBAC mode);
# `cleanup` needs none of it (a restart leaves nothing to take back).
SURGE_IAM_PERMISSIONS: tuple[str, ...] = (
    "container.deployments.get",
    "container.deployments.list",
    "container.deployments.update",  # the restartedAt annotation (a patch)
    "container.replicaSets.list",
    "container.persistentVolumeClaims.list",
)

SURGE_RBAC_RULES: tuple[RbacRule, ...] = (
    RbacRule("apps", "deployments", ("get", "list", "patch")),
    RbacRule("apps", "replicasets", ("list",)),
    RbacRule("", "persistentvolumeclaims", ("list",)),
)

# `python -m compactor cleanup` (compactor/cleanup.py): run by a person, usually with their own admin
# credentials, never by the function, whose roles hold none of this (no job ever deletes a Lease). What
# a non-admin operator needs: read and patch Nodes, Pods and HPAs (node-compactor's annotations, taints,
# cordons and minReplicas), delete node replacement's placeholder pods in the placeholder namespace, and
# hold, then delete, both jobs' Leases by name in the Lease namespace (create, for a Lease that does not
# exist yet, cannot be limited by name; see RBAC_RULES).
CLEANUP_RBAC_RULES: tuple[RbacRule, ...] = (
    RbacRule("", "nodes", ("get", "list", "patch")),
    RbacRule("", "pods", ("get", "list", "patch")),
    RbacRule("", "pods", ("delete",), placeholder_namespace=True),
    RbacRule("autoscaling", "horizontalpodautoscalers", ("get", "list", "patch")),
    RbacRule("coordination.k8s.io", "leases", ("create",), lease_namespace=True),
    RbacRule(
        "coordination.k8s.io",
        "leases",
        ("get", "update", "delete"),
        (COMPACTOR_LEASE, HPA_FLOOR_LEASE),
        lease_namespace=True,
    ),
)
