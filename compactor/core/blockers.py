"""Pods that make a node not removable (DESIGN rule 5), each with a reason a person can read.

The rule names follow Cluster Autoscaler's drainability rules; the
`safe-to-evict: "true"` annotation overrides the no-controller, local-storage
and kube-system rules, never a PodDisruptionBudget or an explicit "false".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compactor.core.cluster import PdbIndex
from compactor.core.model import Pdb, Pod
from compactor.settings.config import Config

SYSTEM_NAMESPACE = "kube-system"


@dataclass(frozen=True, slots=True)
class Blocker:
    """One reason a node is not a drain candidate. `kind` groups them for summaries."""

    kind: str
    text: str


# Kinds of pod blocker that the Eviction API itself enforces: a drain in
# progress may still try these pods (a 429 is retried), never the others.
API_ENFORCED = frozenset({"pdb"})


def pod_blockers(pod: Pod, pdbs: PdbIndex, config: Config) -> list[Blocker]:
    """Why this pod stops its node from being drained; empty when it can be evicted."""
    return pods_blockers((pod,), pdbs, config)


def node_pods_blockers(pods: tuple[Pod, ...], pdbs: PdbIndex, config: Config) -> list[Blocker]:
    """`pods_blockers` of a node's pods, found once per tuple of pods for the plans sharing `pdbs`."""
    key = (id(pods), config.skip_nodes_with_local_storage, config.skip_nodes_with_system_pods)
    known = pdbs.pods_found.get(key)
    if known is not None and known[0] is pods:
        return list(known[1])
    covered: list[Pdb] = []
    found = pods_blockers(pods, pdbs, config, covered)
    pdbs.pods_found[key] = (pods, found, tuple({id(pdb): pdb for pdb in covered}.values()))
    return list(found)


def pods_blockers(
    pods: Iterable[Pod], pdbs: PdbIndex, config: Config, covered: list[Pdb] | None = None
) -> list[Blocker]:
    """`pod_blockers` of every pod of a node, in order; one call for a node's 30 pods, not 30. `covered`, when
    given, receives the PDBs covering each pod."""
    found: list[Blocker] = []
    covering_of = pdbs.covering
    known = pdbs.covering_known  # `PdbIndex.covering`'s own first lookup, without a call per pod
    for pod in pods:
        if pod.stays_on_node:
            continue
        labels = pod.labels
        hit = known.get((pod.namespace, id(labels)))
        covering = hit[1] if hit is not None and hit[0] is labels else covering_of(pod)
        if covering and covered is not None:
            covered.extend(covering)
        if (
            pod.safe_to_evict is None
            and not pod.do_not_disrupt
            and pod.controller_kind is not None
            and not pod.local_storage
            and pod.namespace != SYSTEM_NAMESPACE
            and (not covering or (len(covering) == 1 and covering[0].disruptions_allowed > 0))
        ):
            continue  # the common case, decided without building any text
        found.extend(_reasons(pod, covering, config))
    return found


def _reasons(pod: Pod, covering: Sequence[Pdb], config: Config) -> list[Blocker]:
    reasons: list[Blocker] = []
    where = f"pod {pod.key}"
    if pod.safe_to_evict is False:
        reasons.append(Blocker("pod", f"{where}: annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false"))
    if pod.do_not_disrupt:
        reasons.append(Blocker("pod", f"{where}: annotated karpenter.sh/do-not-disrupt=true"))
    overridden = pod.safe_to_evict is True
    if not overridden:
        if pod.controller_kind is None:
            reasons.append(Blocker("pod", f"{where}: no controller"))
        if pod.local_storage and config.skip_nodes_with_local_storage:
            volumes = ", ".join(pod.local_storage)
            reasons.append(Blocker("pod", f"{where}: local storage (volume {volumes})"))
        if pod.namespace == SYSTEM_NAMESPACE and not covering and config.skip_nodes_with_system_pods:
            reasons.append(Blocker("pod", f"{where}: kube-system pod without a PodDisruptionBudget"))
    if len(covering) > 1:
        names = ", ".join(pdb.name for pdb in covering)
        text = f"{where}: covered by {len(covering)} PodDisruptionBudgets ({names}); the Eviction API refuses it"
        reasons.append(Blocker("pod", text))
    for pdb in covering:
        if pdb.disruptions_allowed <= 0:
            reasons.append(Blocker("pdb", f"{where}: PodDisruptionBudget {pdb.name} allows no disruption now"))
    return reasons
