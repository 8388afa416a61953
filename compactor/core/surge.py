"""Which pods a drain moves by a surging rolling restart of their Deployment, and why the others are not.

A pool with `surgeSingleReplicas` moves the only pod of a Deployment (or a
pod that a PodDisruptionBudget holds only because its minAvailable is the
Deployment's replica count) by restarting the Deployment instead of evicting
the pod: a Deployment whose rolling update surges (maxSurge >= 1,
maxUnavailable 0) starts the new pod on another node, the drained node being
cordoned, and removes the old pod only once the new one is Ready, so the
workload never has no Ready pod. The executor writes the restart
(`compactor.actuation.surging`); this module decides, from the snapshot alone:

- `verdicts`: for each single-replica pod of a node (the only pod of its
  Deployment, of its controller, or one a PDB allows no disruption), what a
  drain does with it: "restart" (patch the Deployment), "wait" (the
  Deployment is rolling out after a restart written for this drain), or
  "evict" (the normal rules), always with a reason a person can read;
- `split`: the decision's pods moved by a restart, out of its evictions;
- `pods_under_rules`: the pods whose blockers still count (a PDB that only
  a restart can satisfy no longer blocks the node);
- `proof_state`: the node's pods as the fit proof must place them, with the
  extra pods a multi-replica Deployment's surge starts elsewhere.

Percentages resolve as Kubernetes does (`ResolveFenceposts`): maxSurge rounds
up, maxUnavailable rounds down, and when both come to 0 maxUnavailable is 1.
Must never: read anything but the snapshot, or call a pod movable that
another rule (safe-to-evict, do-not-disrupt, local storage, several PDBs)
blocks.
"""

from __future__ import annotations

import math
import operator
import weakref
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import msgspec

from compactor.core.blockers import API_ENFORCED, pod_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import DRAIN_STARTED_AT, Claim, Deployment, Pdb, Pod, ReplicaSet
from compactor.core.plan import Decision, SurgeVerdict
from compactor.core.timing import parse_stamp

Action = Literal["restart", "wait", "evict"]

# Access modes under which a pod on another node cannot mount the claim while the old pod holds it.
SINGLE_NODE_MODES = ("ReadWriteOnce", "ReadWriteOncePod")
# What the API server defaults an absent maxSurge and maxUnavailable to.
DEFAULT_ROLLING = "25%"
# How to save a snapshot the planner can judge restarts from (`plan --snapshot`).
SNAPSHOT_KINDS = "nodes,pods,poddisruptionbudgets,deployments,replicasets,persistentvolumeclaims"

NO_VERDICTS: tuple[SurgeVerdict, ...] = ()
NO_PDBS: tuple[Pdb, ...] = ()


def pool_surges(view: ClusterView, pool: str | None) -> bool:
    settings = view.config.enabled_pool(pool)
    return settings is not None and settings.surge_single_replicas


def missing_note(view: ClusterView) -> str | None:
    """What a pool with surgeSingleReplicas cannot judge in this snapshot, or None."""
    if not view.config.surges:
        return None
    snapshot = view.snapshot
    if snapshot.deployments or snapshot.replica_sets:
        return None
    return (
        "a pool sets surgeSingleReplicas but the snapshot has no Deployments or ReplicaSets, so no pod is moved "
        "by a rolling restart and every pod follows the normal rules (a saved snapshot needs "
        f"`kubectl get {SNAPSHOT_KINDS} -A -o json`)"
    )


def verdicts(view: ClusterView, state: NodeState) -> tuple[SurgeVerdict, ...]:
    """The node's single-replica pods and what a drain does with each; empty unless its pool opts in."""
    if not pool_surges(view, state.pool):
        return NO_VERDICTS
    return _node(view, state).verdicts


def moved_by_restart(view: ClusterView, state: NodeState) -> frozenset[str]:
    """Keys of the node's pods that a drain moves by a rolling restart (to restart or being restarted)."""
    if not pool_surges(view, state.pool):
        return frozenset()
    return _node(view, state).moved


def pods_under_rules(view: ClusterView, state: NodeState) -> tuple[Pod, ...]:
    """The node's pods whose blockers count: all but those a rolling restart moves. The same tuple for
    the same node and view, so `blockers.node_pods_blockers` finds it again."""
    if not pool_surges(view, state.pool):
        return state.pods
    return _node(view, state).under_rules


def proof_state(view: ClusterView, state: NodeState) -> NodeState:
    """The node as the fit proof places it: its movable pods, and for each Deployment restarted with
    several replicas the pods its surge starts at once beyond those replacing this node's (kept for good:
    the proof does not model the old pods elsewhere going, so it errs on the side of room)."""
    if not pool_surges(view, state.pool):
        return state
    extra = _node(view, state).surge_pods
    if not extra:
        return state
    return replace(state, movable_pods=state.movable_pods + extra)


def split(decision: Decision, view: ClusterView) -> Decision:
    """A drain's decision with the pods a rolling restart moves taken out of its evictions, into `restarts`."""
    if decision.action not in ("drain", "continue-drain") or decision.node is None:
        return decision
    state = view.nodes.get(decision.node)
    if state is None or not pool_surges(view, state.pool):
        return decision
    found = _node(view, state)
    if not found.moved:
        return decision
    restarts = tuple(
        (verdict.pod, verdict.deployment)
        for verdict in found.verdicts
        if verdict.action in ("restart", "wait") and verdict.deployment is not None
    )
    evictions = tuple(key for key in decision.evictions if key not in found.moved)
    return replace(decision, evictions=evictions, restarts=restarts)


# -- the rules for one Deployment, shared with the executor's re-check -----------------------------------


def scaled(value: str | None, total: int, *, round_up: bool) -> int | None:
    """An IntOrString as Kubernetes resolves it against `total` (`GetScaledValueFromIntOrPercent`);
    None when it does not read. Absent is the API's default, 25%."""
    text = (DEFAULT_ROLLING if value is None else value).strip()
    if text.endswith("%"):
        number = text[:-1]
        if not number.lstrip("+-").isdigit():
            return None
        share = int(number) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    if not text.lstrip("+-").isdigit():
        return None
    return int(text)


def strategy_problems(deployment: Deployment) -> list[str]:
    """Why a restart of this Deployment would not surge (empty when it does): the new pod must be Ready
    before the old one goes, and only a RollingUpdate with maxSurge >= 1 and maxUnavailable 0 does that."""
    if deployment.strategy != "RollingUpdate":
        return [
            f"its strategy is {deployment.strategy or 'not set'}, which removes the old pod before the new one runs"
        ]
    replicas = deployment.replicas
    surge = scaled(deployment.max_surge, replicas, round_up=True)
    unavailable = scaled(deployment.max_unavailable, replicas, round_up=False)
    problems = []
    if surge is None:
        problems.append(f"its maxSurge {deployment.max_surge!r} does not read")
    if unavailable is None:
        problems.append(f"its maxUnavailable {deployment.max_unavailable!r} does not read")
    if surge is None or unavailable is None:
        return problems
    if surge == 0 and unavailable == 0:
        unavailable = 1  # what the Deployment controller does (ResolveFenceposts)
    shown_surge = _shown(deployment.max_surge, surge)
    shown_unavailable = _shown(deployment.max_unavailable, unavailable)
    if surge < 1:
        problems.append(f"its maxSurge {shown_surge} starts no new pod before the old one goes")
    if unavailable > 0:
        problems.append(
            f"its maxUnavailable {shown_unavailable} lets the rollout remove the old pod before the new one is Ready"
        )
    if deployment.paused:
        problems.append("it is paused, so a restart would not roll it out")
    return problems


def rollout_problems(deployment: Deployment, others: Sequence[ReplicaSet]) -> list[str]:
    """Why this Deployment is mid-rollout (empty when it is not): `others` are its ReplicaSets other
    than the pod's that still have pods or want some."""
    problems = []
    if deployment.observed_generation != deployment.generation:
        problems.append(
            f"it is mid-rollout (the controller observed generation {deployment.observed_generation} "
            f"of {deployment.generation})"
        )
    elif deployment.updated_replicas != deployment.replicas:
        problems.append(
            f"it is mid-rollout ({deployment.updated_replicas} of {deployment.replicas} replica(s) updated)"
        )
    for other in others:
        problems.append(
            f"it is mid-rollout (ReplicaSet {other.name} still has {max(other.replicas, other.status_replicas)} pod(s))"
        )
    return problems


def restarted_for_drain(deployment: Deployment, drain_started: str | None) -> bool:
    """Whether the Deployment's last restart was written at or after the drain started: this drain's."""
    restarted = parse_stamp(deployment.restarted_at)
    started = parse_stamp(drain_started)
    return restarted is not None and started is not None and restarted >= started


# -- the index and the per-node answers ----------------------------------------------------------------


class _Index:
    """The snapshot's Deployments, ReplicaSets and claims, by namespace and name."""

    def __init__(self, view: ClusterView) -> None:
        snapshot = view.snapshot
        self.read = bool(snapshot.deployments or snapshot.replica_sets)
        self.claims_read = bool(snapshot.claims)
        self.deployments: dict[tuple[str, str], Deployment] = {(d.namespace, d.name): d for d in snapshot.deployments}
        self.replica_sets: dict[tuple[str, str], ReplicaSet] = {(r.namespace, r.name): r for r in snapshot.replica_sets}
        self.sets_of: dict[tuple[str, str], list[ReplicaSet]] = defaultdict(list)
        for replica_set in snapshot.replica_sets:
            if replica_set.deployment is not None:
                self.sets_of[(replica_set.namespace, replica_set.deployment)].append(replica_set)
        self.claims: dict[tuple[str, str], Claim] = {(c.namespace, c.name): c for c in snapshot.claims}
        self._view = weakref.ref(view)
        self._pods_per_owner: Counter[tuple[str, str | None, str | None]] | None = None
        self.nodes: dict[str, tuple[tuple[Pod, ...], _NodeAnswer]] = {}

    def pods_of_owner(self, pod: Pod) -> int:
        """How many pods of the snapshot share this pod's controller (counted once, when first asked; the
        live reader leaves finished pods out, a saved List may count a Job's finished ones too)."""
        if self._pods_per_owner is None:
            view = self._view()
            pods = view.snapshot.pods if view is not None else ()
            # attrgetter and Counter count in C: 150,000 pods in about 30 ms, not 450.
            self._pods_per_owner = Counter(map(_OWNER_OF, pods))
        return self._pods_per_owner[(pod.namespace, pod.controller_kind, pod.controller_name)]


@dataclass(frozen=True, slots=True)
class _NodeAnswer:
    verdicts: tuple[SurgeVerdict, ...]
    moved: frozenset[str]
    under_rules: tuple[Pod, ...]
    surge_pods: tuple[Pod, ...]


_indexes: weakref.WeakKeyDictionary[ClusterView, _Index] = weakref.WeakKeyDictionary()
_OWNER_OF = operator.attrgetter("namespace", "controller_kind", "controller_name")


def _index(view: ClusterView) -> _Index:
    index = _indexes.get(view)
    if index is None:
        index = _indexes[view] = _Index(view)
    return index


def _node(view: ClusterView, state: NodeState) -> _NodeAnswer:
    index = _index(view)
    known = index.nodes.get(state.name)
    if known is not None and known[0] is state.pods:
        return known[1]
    found: list[SurgeVerdict] = []
    extra: list[Pod] = []
    on_node: Counter[str] = Counter()
    for pod in state.movable_pods:
        verdict = _verdict(view, index, state, pod)
        if verdict is not None:
            found.append(verdict)
            if verdict.deployment is not None and verdict.action == "restart":
                on_node[verdict.deployment] += 1
    moved = frozenset(verdict.pod for verdict in found if verdict.action != "evict")
    for deployment_key, count in on_node.items():
        namespace, _, name = deployment_key.partition("/")
        deployment = index.deployments[(namespace, name)]
        surge = scaled(deployment.max_surge, deployment.replicas, round_up=True) or 0
        template = next(pod for pod in state.movable_pods if _deployment_of(index, pod) is deployment)
        for number in range(max(0, min(surge, deployment.replicas) - count)):
            extra.append(msgspec.structs.replace(template, name=f"{template.name}~surge-{number + 1}"))
    under_rules = tuple([pod for pod in state.pods if pod.key not in moved]) if moved else state.pods
    answer = _NodeAnswer(tuple(found), moved, under_rules, tuple(extra))
    index.nodes[state.name] = (state.pods, answer)
    return answer


def _deployment_of(index: _Index, pod: Pod) -> Deployment | None:
    if pod.controller_kind != "ReplicaSet" or pod.controller_name is None:
        return None
    replica_set = index.replica_sets.get((pod.namespace, pod.controller_name))
    if replica_set is None or replica_set.deployment is None:
        return None
    return index.deployments.get((pod.namespace, replica_set.deployment))


def _verdict(view: ClusterView, index: _Index, state: NodeState, pod: Pod) -> SurgeVerdict | None:
    """What a drain does with this pod, or None when it is no single-replica pod (eviction leaves its
    workload a Ready pod) or is already leaving."""
    if pod.terminating or pod.controller_kind is None or pod.controller_name is None:
        return None  # a bare pod is blocked by its own rule; a terminating one is going anyway
    pdbs = view.pdbs
    labels = pdbs.covering_known.get((pod.namespace, id(pod.labels)))  # `PdbIndex.covering`'s own first lookup
    covering = labels[1] if labels is not None and labels[0] is pod.labels else pdbs.covering(pod)
    held = tuple([pdb for pdb in covering if pdb.disruptions_allowed <= 0]) if covering else NO_PDBS
    if not held and pod.controller_kind == "ReplicaSet":
        # The common pod, a replica of a Deployment with several, which an eviction leaves other Ready
        # pods: found without building any text.
        replica_set = index.replica_sets.get((pod.namespace, pod.controller_name))
        if replica_set is not None and replica_set.deployment is not None:
            deployment = index.deployments.get((pod.namespace, replica_set.deployment))
            if deployment is not None and deployment.replicas != 1:
                return None
    owner = f"{pod.controller_kind} {pod.namespace}/{pod.controller_name}"
    if pod.controller_kind != "ReplicaSet":
        if not held and index.pods_of_owner(pod) != 1:
            return None
        return SurgeVerdict(pod.key, owner, None, "evict", _not_a_deployment(pod.controller_kind))
    if not index.read:
        if not held and index.pods_of_owner(pod) != 1:
            return None
        return SurgeVerdict(
            pod.key, owner, None, "evict", "Deployments and ReplicaSets were not read, so it is not restarted"
        )
    replica_set = index.replica_sets.get((pod.namespace, pod.controller_name))
    if replica_set is None:
        if not held and index.pods_of_owner(pod) != 1:
            return None
        return SurgeVerdict(
            pod.key, owner, None, "evict", f"its ReplicaSet {pod.controller_name} is not in the snapshot"
        )
    if replica_set.deployment is None:
        if not held and replica_set.replicas != 1:
            return None
        return SurgeVerdict(
            pod.key, owner, None, "evict", "its ReplicaSet has no Deployment, which alone rolls a new pod out first"
        )
    deployment_key = f"{pod.namespace}/{replica_set.deployment}"
    owner = f"Deployment {deployment_key}"
    deployment = index.deployments.get((pod.namespace, replica_set.deployment))
    if deployment is None:
        if not held and replica_set.replicas != 1:
            return None
        return SurgeVerdict(
            pod.key, owner, None, "evict", f"its Deployment {replica_set.deployment} is not in the snapshot"
        )
    if deployment.replicas != 1 and not held:
        return None  # an eviction leaves it other Ready pods, and a PDB guards them
    problems = _pdb_problems(held, covering, deployment)
    problems += strategy_problems(deployment)
    problems += _claim_problems(index, pod)
    problems += [
        _without_subject(blocker.text, pod)
        for blocker in pod_blockers(pod, view.pdbs, view.config)
        if blocker.kind not in API_ENFORCED
    ]
    others = [
        other
        for other in index.sets_of.get((pod.namespace, deployment.name), ())
        if other.name != replica_set.name and (other.replicas > 0 or other.status_replicas > 0)
    ]
    rolling = rollout_problems(deployment, others)
    mine = restarted_for_drain(deployment, state.node.annotations.get(DRAIN_STARTED_AT))
    if problems:
        return SurgeVerdict(pod.key, owner, None, "evict", "; ".join(problems))
    if mine and rolling:
        return SurgeVerdict(
            pod.key,
            owner,
            deployment_key,
            "wait",
            f"restarted for this drain at {deployment.restarted_at}; waiting for the new pod to be Ready elsewhere",
        )
    if mine:
        return SurgeVerdict(
            pod.key,
            owner,
            None,
            "evict",
            "restarted for this drain already and its pod is still here (the new pod landed on this node), "
            "so it follows the normal rules",
        )
    if rolling:
        return SurgeVerdict(pod.key, owner, None, "evict", "; ".join(rolling))
    why = "its only pod" if deployment.replicas == 1 else f"a pod that PodDisruptionBudget {held[0].name} holds"
    return SurgeVerdict(
        pod.key,
        owner,
        deployment_key,
        "restart",
        f"{why}: a rolling restart starts the new pod elsewhere and removes this one only once it is Ready",
    )


def _pdb_problems(held: Sequence[Pdb], covering: Sequence[Pdb], deployment: Deployment) -> list[str]:
    """Why the PDBs that allow no disruption hold the pod for another reason than minAvailable being the
    Deployment's replica count (which a surge satisfies: a Ready pod is never missing)."""
    problems: list[str] = []
    if len(covering) > 1:
        return problems  # `pod_blockers` says it: the Eviction API refuses such a pod, and so does this
    for pdb in held:
        if pdb.min_available is None:
            shown = f" (maxUnavailable {pdb.max_unavailable})" if pdb.max_unavailable is not None else ""
            problems.append(f"PodDisruptionBudget {pdb.name}{shown} allows no disruption at all")
            continue
        need = scaled(pdb.min_available, deployment.replicas, round_up=True)
        if need is None:
            problems.append(f"PodDisruptionBudget {pdb.name}'s minAvailable {pdb.min_available!r} does not read")
        elif need != deployment.replicas:
            problems.append(
                f"PodDisruptionBudget {pdb.name} allows no disruption and its minAvailable {pdb.min_available} "
                f"is not the Deployment's {deployment.replicas} replica(s)"
            )
        elif deployment.available_replicas < deployment.replicas:
            problems.append(
                f"PodDisruptionBudget {pdb.name} allows no disruption because only "
                f"{deployment.available_replicas} of {deployment.replicas} replica(s) are available"
            )
    return problems


def _claim_problems(index: _Index, pod: Pod) -> list[str]:
    problems = []
    for claim_name in pod.pvc_names:
        claim = index.claims.get((pod.namespace, claim_name))
        if claim is None:
            where = "PersistentVolumeClaims were not read" if not index.claims_read else "it is not in the snapshot"
            problems.append(f"its volume claim {claim_name} may be ReadWriteOnce ({where})")
            continue
        if claim.owner_pod == pod.name:
            continue  # a generic ephemeral volume: the new pod gets a claim of its own
        modes = [mode for mode in claim.access_modes if mode in SINGLE_NODE_MODES]
        if modes:
            problems.append(
                f"its volume claim {claim_name} is {modes[0]}: a new pod on another node cannot mount it "
                "while this one holds it"
            )
    return problems


def _not_a_deployment(kind: str) -> str:
    if kind == "StatefulSet":
        return "a StatefulSet starts a pod's replacement only once the old pod is gone; only Deployments are restarted"
    return f"only a Deployment's pods are moved by a rolling restart, not a {kind}'s"


def _without_subject(text: str, pod: Pod) -> str:
    prefix = f"pod {pod.key}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _shown(written: str | None, resolved: int) -> str:
    text = DEFAULT_ROLLING if written is None else written
    return text if not text.endswith("%") else f"{text} (= {resolved})"
