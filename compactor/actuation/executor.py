"""Carries out a plan against the cluster (DESIGN.md "Executing a run").

Marks first, then the decision: continue a drain, roll one back, or start a
new one after re-reading the node and its pods and planning again with them
(a decision that no longer holds is a no-op, not an error). A drain starts
with one patch that cordons the node and writes `drain-started-at`, guarded
by the node's resourceVersion, and goes on with evictions through the
Eviction API. Every write is a single patch, so a crash between any two of
them leaves a state the next run reads correctly.

Right before each write only one run may make (the cordon, each batch of
evictions, a rollback) the run checks its deadline and proves, through the
`guard` (the Lease renewal), that it still holds the Lease. Before every
batch of evictions it also re-reads the node (someone else's uncordon, an
opt-out: `node-compactor.dev/disabled`, the Cluster Autoscaler's
`scale-down-disabled`, `karpenter.sh/do-not-disrupt`); and before every batch
of pods not tried yet but the first, which the plan has just proven, and
before a retry once the last proof is older than PROOF_INTERVAL_PROOFS times
what a proof takes, it takes the whole cluster as it is now (`proof_state`:
the run's read kept current by watches, proven to show every eviction the run
made, or the cluster read again) and asks the
planner's own question again (`inflight.in_flight`): do the pods left still
fit on the other nodes as they are now, with the pods waiting for the
scheduler placed first, and is no pod this pool could hold unschedulable? A
pod turned safe-to-evict "false" or do-not-disrupt answers no as well. When
the answer is no, evictions stop at that batch, with a Warning Event and the
reason in the outcome.

A 409 Conflict on any write is a re-read, never a crash: the object is read
again and the write retried (up to CONFLICT_RETRIES times) or skipped, with
the reason in the outcome's `skipped`; the run always ends with a report.
A 5xx or a broken connection is sent again by the adapter (`kube.Cluster`,
within the run's budget); one that outlasts that is a TransientError, and the
write is skipped the same way, with what the run did not do because of it: no
eviction follows a cordon, a Lease renewal or a re-read of the node that did
not succeed, and a rollback not written leaves `drain-started-at` for the next
run. An eviction answered so is re-checked before it is sent again: the pod may
be gone from the node already, or be a new pod of the same name elsewhere.

Pods a pool with surgeSingleReplicas moves by a rolling restart (the
decision's `restarts`) are not evicted: their Deployments are restarted
before the evictions and waited for after them (`surging`).

Must never: DELETE a pod, uncordon a node without our `drain-started-at`,
write anything in a dry run, or write after losing the Lease or its deadline.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import msgspec

from compactor.actuation import deletioncost, placeholders, surging, tainting
from compactor.core import inflight, planner, proof
from compactor.core.cluster import ClusterView
from compactor.core.model import (
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    REPLACEABLE_SINCE,
    UNDERUTILIZED_SINCE,
    Pod,
    Snapshot,
)
from compactor.core.plan import Decision, Plan, SurgeVerdict
from compactor.core.prices import pricing
from compactor.core.timing import format_stamp, parse_stamp, seconds_between
from compactor.errors import ClusterAccessError, CompactorError, RunFailedError, TransientError
from compactor.kube import snapshot as parsing
from compactor.kube.answers import ConflictError, EvictionResult, NotFoundError
from compactor.settings.config import Config

log = logging.getLogger(__name__)

EVICTION_CONCURRENCY = 8
MARK_CONCURRENCY = 8
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 15.0
# Time kept back from the budget to finish the run cleanly (release the Lease, answer).
WRAP_UP_SECONDS = 10.0
# Evictions re-check the deadline, the node and the Lease before every this many attempts...
EVICTIONS_PER_CHECK = EVICTION_CONCURRENCY
# ... and whenever this much time has passed since the last check (backoffs included).
CHECK_INTERVAL_SECONDS = 5.0
# The whole cluster is read again and the drain proven again before every EVICTIONS_PER_CHECK pods evicted for
# the first time, and, for retries (a PDB's 429, a 5xx), once the last proof is older than this many times what
# that proof took (at least CHECK_INTERVAL_SECONDS): proofs start at least 4 proof-durations apart, so reading
# the cluster takes at most a quarter of a drain held by a PodDisruptionBudget, where before it took nearly all
# of it at 5,000 nodes (docs/drain-states.md "Proving a batch", docs/benchmarks.md).
PROOF_INTERVAL_PROOFS = 4.0
# Times a write that met a 409 Conflict is read and tried again before it is skipped for this run.
CONFLICT_RETRIES = 3

Guard = Callable[[str], None]
"""Called with what the run is about to do; raises a CompactorError when it must not (the Lease is lost)."""


class ProofState(Protocol):
    """The cluster as it is now, for the proof before each later batch of evictions (nodes, pods, PDBs):
    `compactor.kube.watching.ProofState` live, the run's read kept current by watches and proven as new
    as the run's last eviction answer, or the cluster read again."""

    def snapshot(self) -> Snapshot: ...

    def evicted(self, key: str) -> None:
        """The Eviction API answered that it evicted pod `key` ("namespace/name")."""

    def node_read(self, node: dict[str, Any]) -> None:
        """The draining node as the check before a batch read it (GET): a proof's state holds it as new."""


class ClusterPort(Protocol):
    """What the executor needs of a cluster: `compactor.kube.client.Cluster` live, an in-memory model in simulations.

    Node and pod objects are Kubernetes JSON. `patch_node` applies a JSON merge
    patch, honouring `metadata.resourceVersion` in it as a precondition
    (ConflictError), and raises NotFoundError for a missing node.
    """

    def node(self, name: str) -> dict[str, Any] | None: ...

    def pods_on(self, node_name: str) -> list[dict[str, Any]]: ...

    def pdbs(self) -> list[dict[str, Any]]: ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def evict(self, namespace: str, name: str) -> EvictionResult: ...

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def event(self, node: Any, *, reason: str, message: str, warning: bool, now: datetime) -> None: ...


@dataclass
class Outcome:
    """What the run did; rendered into the report's `outcome`."""

    dry_run: bool
    marks_added: list[str] = field(default_factory=list)
    marks_removed: list[str] = field(default_factory=list)
    replaceable_added: list[str] = field(default_factory=list)
    replaceable_removed: list[str] = field(default_factory=list)
    soft_taints_added: list[str] = field(default_factory=list)
    soft_taints_removed: list[str] = field(default_factory=list)
    reservations_added: list[str] = field(default_factory=list)
    reservations_removed: list[str] = field(default_factory=list)
    deletion_costs_added: list[str] = field(default_factory=list)
    deletion_costs_removed: list[str] = field(default_factory=list)
    drain_started: bool = False
    drain_completed: bool = False
    rolled_back: bool = False
    stale: str | None = None  # why a new drain was not started after re-validation
    interrupted: str | None = None  # why evictions stopped early (uncordoned, opted out, no longer fits, ...)
    held: str | None = None  # why the drain evicted nothing more: it waits (the pods left fit nowhere, ...)
    given_back: list[str] = field(default_factory=list)  # nodes rolled back (uncordoned) in this run
    restamped: list[str] = field(default_factory=list)  # nodes whose future drain-started-at became now
    skipped: list[str] = field(default_factory=list)  # writes skipped after conflicts, each with its reason
    proofs: int = 0  # times the cluster was read again to prove a later batch of evictions
    evicted: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    # Rolling restarts (pools with surgeSingleReplicas): the Deployments restarted, the pods they moved.
    restarted: list[str] = field(default_factory=list)
    moved_by_restart: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # pod -> why it is still there (PDB, 5xx, time)
    # Node replacement's writes (`placeholders`): pods created and deleted, nodes annotated.
    replacement: placeholders.Written = field(default_factory=placeholders.Written)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "marksAdded": sorted(self.marks_added),
            "marksRemoved": sorted(self.marks_removed),
            "replaceableAdded": sorted(self.replaceable_added),
            "replaceableRemoved": sorted(self.replaceable_removed),
            "softTaintsAdded": sorted(self.soft_taints_added),
            "softTaintsRemoved": sorted(self.soft_taints_removed),
            "reservationsAdded": sorted(self.reservations_added),
            "reservationsRemoved": sorted(self.reservations_removed),
            "deletionCostsAdded": sorted(self.deletion_costs_added),
            "deletionCostsRemoved": sorted(self.deletion_costs_removed),
            "drainStarted": self.drain_started,
            "drainCompleted": self.drain_completed,
            "rolledBack": self.rolled_back,
            "stale": self.stale,
            "interrupted": self.interrupted,
            "held": self.held,
            "givenBack": sorted(self.given_back),
            "restamped": sorted(self.restamped),
            "skipped": list(self.skipped),
            "proofs": self.proofs,
            "evicted": sorted(self.evicted),
            "gone": sorted(self.gone),
            "restarted": sorted(self.restarted),
            "movedByRestart": sorted(self.moved_by_restart),
            "waiting": dict(sorted(self.waiting.items())),
            "placeholdersCreated": sorted(self.replacement.created),
            "placeholdersDeleted": sorted(self.replacement.deleted),
            "replacedByAdded": sorted(self.replacement.marked_replaced),
            "replacedByRemoved": sorted(self.replacement.cleared),
            "replacementFailed": sorted(self.replacement.marked_failed),
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class Budget:
    """The run's time budget on the monotonic clock."""

    deadline: float
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def remaining(self) -> float:
        return self.deadline - WRAP_UP_SECONDS - self.monotonic()


class Executor:
    def __init__(
        self,
        cluster: ClusterPort,
        config: Config,
        *,
        clock: Callable[[], datetime],
        budget: Budget,
        dry_run: bool,
        first_backoff: float = FIRST_BACKOFF_SECONDS,
        guard: Guard | None = None,
        proof_state: ProofState | None = None,
        deployments: surging.DeploymentPort | None = None,
        restart_wait: bool = True,
        read_seconds: float = 0.0,
        replacements: placeholders.PlaceholderPort | None = None,
        prices: pricing.PriceTable | None = None,
        proofs: proof.Memo | None = None,
        threads: bool = True,
    ) -> None:
        """`proof_state` gives the cluster as it is now for the proof before each later batch of evictions;
        without one (the simulations' in-memory port) only the node is re-read between batches.
        `deployments` restarts the Deployments of pods a rolling restart moves (surgeSingleReplicas);
        without it such pods stay where they are. `restart_wait` False checks the rollouts once instead of
        waiting for them: where no time passes inside a run (the simulator), the next run sees them done.
        `read_seconds`, what the run's own read of the cluster took, stands for a proof's duration until
        the run has timed one (`PROOF_INTERVAL_PROOFS`). `replacements` creates and deletes node replacement's
        placeholder pods; without it a replacement is only reported. `prices` is the price table the plan was
        made with (a priceFile's; None: the built-in one), so that the plan made again before a drain ranks the
        candidates as the first did. `proofs` holds the plan's fit proofs: the plan made again before a drain
        takes them when the node, its pods and the budgets read again are what they were for a proof
        (`proof.same_for_proofs`), as the rest of the snapshot is. `threads` False makes the marks, taints,
        deletion costs and evictions one at a time in the run's own thread, for a port that answers from memory
        (the simulator's: overlapping its calls gains nothing, and its eviction timeline plays the pool's
        workers out in virtual time)."""
        self.cluster = cluster
        self.threads = threads
        self.replacements = replacements
        self.deployments = deployments
        self.restart_wait = restart_wait
        self._single_replicas: tuple[SurgeVerdict, ...] = ()
        self.guard = guard
        self.proof_state = proof_state
        self.config = config
        self.prices = prices
        self.proofs = proofs
        self.clock = clock
        self.budget = budget
        self.dry_run = dry_run
        self.first_backoff = first_backoff
        self.outcome = Outcome(dry_run=dry_run)
        # Eviction checkpoints (see `_may_evict`): shared by the eviction workers.
        self._check_lock = threading.Lock()
        self._attempts_since_check = 0
        self._last_check: float | None = None
        self._stopped: str | None = None
        # Full proofs (see `_may_evict`): when the last one started, what it took, the pods first tried since.
        self._last_proof = 0.0
        self._proof_seconds = max(0.0, read_seconds)
        self._new_since_proof = 0
        self._tried: set[str] = set()  # pods this run has sent an eviction for (a later one is a retry)
        # The pods the latest proof lets go ("namespace/name"); None: every pod of the decision.
        self._allowed: frozenset[str] | None = None

    def execute(self, plan: Plan, snapshot: Snapshot) -> Outcome:
        if self.dry_run:
            return self.outcome
        # Each step on its own: a conflict no step expected skips that step, never the decision.
        self._step("marks", lambda: self._write_marks(plan))
        self._step("soft taints", lambda: self._soft_taints(plan))
        self._step("pod-deletion-costs", lambda: self._deletion_costs(plan))
        self._step("drain-started-at", lambda: self._restamp(plan))
        self._step("node replacement", lambda: self._replacement(plan))
        decision = plan.decision
        self._single_replicas = next((n.single_replicas for n in plan.nodes if n.name == decision.node), ())
        if decision.action == "continue-drain" and decision.node:
            if decision.held is not None:
                self._wait(decision.node, decision.reason)
            else:
                self._step("evictions", lambda: self._continue(decision.node or "", decision.evictions, decision))
        elif decision.action == "rollback" and decision.node:
            self._step("rollback", lambda: self._rollback(decision.node or "", decision.reason))
        elif decision.action == "drain" and decision.node:
            self._step("drain", lambda: self._drain(decision, snapshot))
        for name, reason in plan.more_rollbacks:
            self._step("rollback", functools.partial(self._rollback, name, reason))
        if self.outcome.errors:
            raise RunFailedError(
                f"the run could not finish: {len(self.outcome.errors)} error(s)", list(self.outcome.errors)
            )
        return self.outcome

    def _replacement(self, plan: Plan) -> None:
        """Node replacement's writes for this run (`placeholders`): leftovers first, then the step."""
        port = self.replacements
        if port is None:
            return
        namespace = self.config.placeholder_namespace
        written = self.outcome.replacement
        if plan.placeholders_remove:
            placeholders.delete(port, namespace, plan.placeholders_remove, written)
        if plan.replaced_by_remove:
            placeholders.clear(port, plan.replaced_by_remove, written)
        underway = plan.replacement
        if underway is None:
            return
        try:
            if underway.step == "create":
                placeholders.start(port, underway, namespace, self.clock(), written)
            elif underway.step in ("delete", "give-up"):
                placeholders.finish(port, underway, namespace, self.clock(), written)
        except ClusterAccessError as error:
            # What was written stays readable: the next run deletes a placeholder no node points to.
            self._error(f"node replacement ({underway.step} {underway.placeholder}): {error}")

    def _step(self, what: str, step: Callable[[], None]) -> None:
        try:
            step()
        except (ConflictError, NotFoundError) as error:
            self._skip(f"{what}: {error}; the next run looks again")
        except TransientError as error:
            # A read no write depended on yet (each write handles its own): the rest of this step waits.
            self._skip(f"{what}: {error.message}; the rest of this step waits for the next run")

    def _workers(self, at_most: int) -> int:
        """How many writes or evictions go at once: `at_most`, one without `threads`."""
        return at_most if self.threads else 1

    def _skip(self, reason: str) -> None:
        with self.outcome._lock:
            self.outcome.skipped.append(reason)
        log.warning("skipped: %s", reason)

    def _soft_taints(self, plan: Plan) -> None:
        self.outcome.soft_taints_added, self.outcome.soft_taints_removed = tainting.apply(
            self.cluster,
            plan.soft_taints_add,
            plan.soft_taints_remove,
            concurrency=self._workers(MARK_CONCURRENCY),
            skipped=self.outcome.skipped,
        )
        _, self.outcome.reservations_removed = tainting.apply(
            self.cluster,
            (),
            plan.reservations_remove,
            concurrency=self._workers(MARK_CONCURRENCY),
            taint=tainting.RESERVED,
            skipped=self.outcome.skipped,
        )

    def _deletion_costs(self, plan: Plan) -> None:
        self.outcome.deletion_costs_added, self.outcome.deletion_costs_removed = deletioncost.apply(
            self.cluster,
            plan.deletion_costs_add,
            plan.deletion_costs_remove,
            concurrency=self._workers(MARK_CONCURRENCY),
            skipped=self.outcome.skipped,
        )

    # -- marks ----------------------------------------------------------------------------------

    def _write_marks(self, plan: Plan) -> None:
        self._write_stamps(
            _MARK, plan.marks_add, plan.marks_remove, plan.now, self.outcome.marks_added, self.outcome.marks_removed
        )
        self._write_stamps(
            _REPLACEABLE,
            plan.replaceable_add,
            plan.replaceable_remove,
            plan.now,
            self.outcome.replaceable_added,
            self.outcome.replaceable_removed,
        )

    def _write_stamps(
        self,
        stamp_kind: _Stamp,
        add: Iterable[str],
        remove: Iterable[str],
        now: datetime,
        added: list[str],
        removed: list[str],
    ) -> None:
        """Put a time annotation (the mark, or `replaceable-since`) on nodes and take it off others, each write
        guarded by the node as just read."""
        stamp = format_stamp(now)
        changes = [(name, stamp) for name in add] + [(name, None) for name in remove]
        if not changes:
            return
        what = stamp_kind.what

        def write(change: tuple[str, str | None]) -> None:
            name, value = change
            for _ in range(CONFLICT_RETRIES + 1):
                # Read first and write guarded by what was read: a person may cordon the node between
                # the run's read of the cluster and this write, and such a node gets no write at all.
                try:
                    found = self.cluster.node(name)
                except TransientError as error:
                    self._skip(f"{what} on {name}: {error.message}; the next run tries again")
                    return
                except CompactorError as error:
                    self._error(f"{what} on {name}: {error.message}")
                    return
                why = _mark_not_to_write(found, value, stamp_kind.key)
                if why is not None:
                    if why:
                        self._skip(f"{what} on {name}: {why}")
                    return
                assert found is not None
                patch = {
                    "metadata": {
                        "resourceVersion": (found.get("metadata") or {}).get("resourceVersion"),
                        "annotations": {stamp_kind.key: value},
                    }
                }
                try:
                    node = self.cluster.patch_node(name, patch)
                    break
                except NotFoundError:
                    return  # the node went away; nothing to write
                except TransientError as error:
                    # Whether it landed is unknown; either way the mark is only a start time, and the
                    # next run reads the node as it is and writes what is still missing.
                    self._skip(f"{what} on {name}: {error.message}; the next run tries again")
                    return
                except ClusterAccessError as error:
                    self._error(f"{what} on {name}: {error.message}")
                    return
                except ConflictError:
                    continue  # changed since it was read (or our write landed though its answer was lost)
            else:
                conflicts = CONFLICT_RETRIES + 1
                self._skip(
                    f"{what} on {name}: the node kept changing ({conflicts} conflicts); the next run tries again"
                )
                return
            with self.outcome._lock:
                (added if value else removed).append(name)
            if value:
                message = stamp_kind.event_message.format(value=value)
                self.cluster.event(
                    node, reason=stamp_kind.event_reason, message=message, warning=False, now=self.clock()
                )

        tainting.each(write, changes, self._workers(MARK_CONCURRENCY))

    # -- a future drain-started-at ------------------------------------------------------------

    def _restamp(self, plan: Plan) -> None:
        """A drain-started-at in the future counts as "started now": write now, so its timeout comes."""
        for name in plan.restamp:
            for attempt in range(CONFLICT_RETRIES + 1):
                try:
                    node = self.cluster.node(name)
                except TransientError as error:
                    self._skip(f"{DRAIN_STARTED_AT} on {name}: {error.message}; the next run writes it")
                    break
                if node is None:
                    break
                metadata = node.get("metadata") or {}
                stamp = parse_stamp((metadata.get("annotations") or {}).get(DRAIN_STARTED_AT))
                now = self.clock()
                if stamp is None or stamp <= now or not (node.get("spec") or {}).get("unschedulable"):
                    break  # changed since the plan: the next run reads it as it is
                patch = {
                    "metadata": {
                        "resourceVersion": metadata.get("resourceVersion"),
                        "annotations": {DRAIN_STARTED_AT: format_stamp(now)},
                    }
                }
                try:
                    self.cluster.patch_node(name, patch)
                except ConflictError:
                    if attempt >= CONFLICT_RETRIES:
                        self._skip(f"{DRAIN_STARTED_AT} on {name}: the node kept changing; the next run tries again")
                    continue
                except NotFoundError:
                    break
                except TransientError as error:
                    self._skip(f"{DRAIN_STARTED_AT} on {name}: {error.message}; the next run writes it")
                    break
                except ClusterAccessError as error:
                    self._error(f"{DRAIN_STARTED_AT} on {name}: {error.message}")
                    break
                self.outcome.restamped.append(name)
                log.warning(
                    "%s on %s was in the future (%s); it now reads %s, so the drain times out",
                    DRAIN_STARTED_AT,
                    name,
                    format_stamp(stamp),
                    format_stamp(now),
                )
                break

    # -- a new drain --------------------------------------------------------------------------

    def _drain(self, decision: Decision, snapshot: Snapshot) -> None:
        name = decision.node
        assert name is not None
        fresh = self._revalidate(name, snapshot)
        if fresh is None:
            return
        node, fresh_decision = fresh
        if not self._may_act(f"cordon {name}", then="nothing was cordoned or evicted; the next run plans again"):
            return
        if fresh_decision.reserved and not self._reserve(name, fresh_decision.reserved):
            return
        now = self.clock()
        patch = {
            "metadata": {
                "resourceVersion": node["metadata"]["resourceVersion"],
                "annotations": {DRAIN_STARTED_AT: format_stamp(now)},
            },
            "spec": {"unschedulable": True},
        }
        try:
            node = self.cluster.patch_node(name, patch)
        except (ConflictError, NotFoundError) as error:
            # A 409 may answer the patch sent again after a 5xx whose patch landed: then the node carries
            # exactly this run's cordon, and the drain goes on as if the first answer had come.
            landed = self._cordon_landed(name, format_stamp(now)) if isinstance(error, ConflictError) else None
            if landed is None:
                # The patch was guarded by the resourceVersion the re-validation read: whatever changed
                # was not validated, so this run does not guess; the next one plans on what it reads.
                self.outcome.stale = f"{name} changed while the drain was being prepared; nothing was done"
                log.info(self.outcome.stale)
                if isinstance(error, ConflictError):
                    self._skip(f"cordon {name}: {error}; the next run plans again")
                return
            node = landed
        except TransientError as error:
            landed = self._cordon_landed(name, format_stamp(now))
            if landed is None:
                # No eviction without a cordon seen to hold. Should it have landed unseen, the node carries
                # drain-started-at and the next run continues the drain (or rolls it back).
                self.outcome.stale = f"{name} could not be cordoned; nothing was evicted"
                self._skip(
                    f"cordon {name}: {error.message}; no pod was evicted, and the next run reads the node "
                    "(cordoned by this run after all: it continues the drain; not: it plans again)"
                )
                return
            node = landed
        except ClusterAccessError as error:
            self._error(f"cordon {name}: {error.message}")
            return
        self.outcome.drain_started = True
        message = f"node-compactor cordoned the node and is draining it: {decision.reason}"
        log.info(message, extra={"fields": {"event": "drain-started", "node": name, "pool": decision.pool}})
        self.cluster.event(node, reason="NodeCompactorDrainStarted", message=message, warning=False, now=now)
        restarting = self._start_restarts(node, fresh_decision)
        self._evict(name, fresh_decision.evictions)
        self._finish_restarts(restarting, node, fresh_decision)
        self._check_completion(name)

    def _cordon_landed(self, name: str, stamp: str) -> dict[str, Any] | None:
        """The node, read again, when it carries this run's cordon (`stamp` as its drain-started-at) although
        the patch's answer said otherwise; None when it does not, or cannot be read."""
        try:
            node = self.cluster.node(name)
        except CompactorError:
            return None
        if node is None or not (node.get("spec") or {}).get("unschedulable"):
            return None
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        return node if annotations.get(DRAIN_STARTED_AT) == stamp else None

    def _reserve(self, name: str, nodes: tuple[str, ...]) -> bool:
        """Put the reserved taint on `nodes` before the first eviction: the proof that `name`'s pods
        fit takes them last, so without the taint on every one of them the drain does not start."""
        written, failed = tainting.reserve(self.cluster, nodes, skipped=self.outcome.skipped)
        self.outcome.reservations_added = written
        if failed:
            self.outcome.stale = (
                f"could not reserve room on {', '.join(failed)} for the drain of {name}; nothing was drained"
            )
            log.info(self.outcome.stale)
            return False
        return True

    def _revalidate(self, name: str, snapshot: Snapshot) -> tuple[dict[str, Any], Decision] | None:
        """Re-read the node, its pods and the PDBs, plan again, and go on only if the answer holds."""
        try:
            node = self.cluster.node(name)
            if node is None:
                self.outcome.stale = f"{name} no longer exists"
                return None
            pods = self.cluster.pods_on(name)
            pdbs = self.cluster.pdbs()
            fresh_node = parsing.parse_node(node)
            fresh_pods = [parsing.parse_pod(pod) for pod in pods]
            fresh_pdbs = tuple(parsing.parse_pdb(pdb) for pdb in pdbs)
        except CompactorError as error:
            self.outcome.stale = f"could not re-read {name}: {error.message}"
            return None
        others, read_before = _pods_apart(snapshot.pods, name)
        updated = msgspec.structs.replace(  # the rest (pool autoscaling, Deployments) as read
            snapshot,
            nodes=tuple(fresh_node if n.name == name else n for n in snapshot.nodes),
            pods=(*others, *fresh_pods),
            pdbs=fresh_pdbs,
        )
        # The plan's proofs hold while the cluster reads as it did for every proof made.
        same = (
            self.proofs is not None
            and fresh_pdbs == snapshot.pdbs
            and fresh_node == next((n for n in snapshot.nodes if n.name == name), None)
            and proof.same_for_proofs(read_before, fresh_pods)
        )
        proofs = self.proofs if same else None
        replanned = planner.plan(updated, self.config, now=self.clock(), prices=self.prices, proofs=proofs)
        if replanned.decision.action == "drain" and replanned.decision.node == name:
            return node, replanned.decision
        report = next((n for n in replanned.nodes if n.name == name), None)
        why = "; ".join(report.blockers) if report and report.blockers else replanned.decision.reason
        self.outcome.stale = f"{name} is no longer a candidate after re-reading it: {why}"
        log.info(self.outcome.stale)
        return None

    # -- a drain under way ----------------------------------------------------------------------

    def _continue(self, name: str, evictions: Iterable[str], decision: Decision | None = None) -> None:
        restarting = None
        if decision is not None and decision.restarts:
            node = self.cluster.node(name)
            restarting = self._start_restarts(node, decision) if node is not None else None
        self._evict(name, evictions)
        if decision is not None and restarting is not None:
            self._finish_restarts(restarting, self.cluster.node(name) or {}, decision)
        self._check_completion(name)

    # -- rolling restarts (pools with surgeSingleReplicas) ----------------------------------------

    def _start_restarts(self, node: dict[str, Any], decision: Decision) -> surging.Restarts | None:
        """Restart the Deployments of the pods the decision moves by a rolling restart, before the
        evictions, once the node is seen still cordoned by this drain and the Lease still ours."""
        if not decision.restarts or decision.node is None:
            if decision.action == "drain" and self._single_replicas:  # say why none is moved that way
                message = surging.node_message((), self._single_replicas)
                self.cluster.event(node, reason=surging.EVENT_REASON, message=message, warning=False, now=self.clock())
            return None
        if self.deployments is None:
            with self.outcome._lock:
                for pod, _ in decision.restarts:
                    self.outcome.waiting[pod] = "rolling restarts cannot be made from here"
            return None
        with self._check_lock:
            self._stopped = self._stopped or self._drain_may_go_on(decision.node, proven=True)
            if self._stopped is not None:
                return None
        return surging.start(
            self.deployments,
            node,
            decision.restarts,
            clock=self.clock,
            may_act=self._may_act,
            verdicts=self._single_replicas,
        )

    def _finish_restarts(self, started: surging.Restarts | None, node: dict[str, Any], decision: Decision) -> None:
        """Wait for the restarted Deployments within the run's budget and the drain's timeout."""
        if started is None or self.deployments is None:
            return
        pool = self.config.enabled_pool(decision.pool)
        drain_started = parse_stamp(((node.get("metadata") or {}).get("annotations") or {}).get(DRAIN_STARTED_AT))

        def time_left() -> float:
            left = self.budget.remaining()
            if pool is not None and drain_started is not None:
                left = min(left, pool.drain_timeout_seconds - seconds_between(drain_started, self.clock()))
            return left

        surging.wait(
            self.deployments, started, time_left=time_left if self.restart_wait else _no_time, sleep=self.budget.sleep
        )
        with self.outcome._lock:
            self.outcome.restarted.extend(started.written)
            self.outcome.moved_by_restart.extend(started.moved)
            self.outcome.waiting.update(started.waiting)
            self.outcome.skipped.extend(started.skipped)
        for error in started.errors:
            self._error(error)

    def _wait(self, name: str, reason: str) -> None:
        """The plan holds the drain: nothing is evicted; say so on the node, where people look."""
        self.outcome.held = reason
        node = self._node_for_event(name)
        message = f"node-compactor evicts nothing now: {reason}"
        log.warning(message, extra={"fields": {"event": "drain-waiting", "node": name}})
        self.cluster.event(node, reason="NodeCompactorDrainWaiting", message=message, warning=True, now=self.clock())

    # -- evictions ----------------------------------------------------------------------------

    def _evict(self, node_name: str, pods: Iterable[str]) -> None:
        keys = list(pods)
        if not keys:
            return

        def evict(key: str) -> None:
            namespace, _, name = key.partition("/")
            delay = self.first_backoff
            maybe_landed = False  # the last attempt was answered 5xx or not at all
            while True:
                stop = self._may_evict(node_name, key)
                if stop is not None:
                    with self.outcome._lock:
                        self.outcome.waiting[key] = f"not evicted: {stop}"
                    return
                allowed = self._allowed
                if allowed is not None and key not in allowed:
                    with self.outcome._lock:
                        self.outcome.waiting[key] = "not evicted: not to be evicted by the cluster read again"
                    return
                if maybe_landed and self._left_the_node(namespace, name, node_name):
                    # Evicted after all (or a new pod of that name runs elsewhere): never evict it twice.
                    with self.outcome._lock:
                        self.outcome.gone.append(key)
                    return
                result = self.cluster.evict(namespace, name)
                maybe_landed = result.unknown
                if result.status == "evicted" and self.proof_state is not None:
                    self.proof_state.evicted(key)  # no proof stands on a state that does not show it
                if result.status in ("evicted", "gone"):
                    with self.outcome._lock:
                        (self.outcome.evicted if result.status == "evicted" else self.outcome.gone).append(key)
                    return
                if result.status == "failed":
                    self._error(f"evict {key}: {result.detail}")
                    return
                if self.budget.remaining() < delay:
                    # PDBs and busy API servers are normal during a drain: the next run goes on.
                    with self.outcome._lock:
                        self.outcome.waiting[key] = result.detail or result.status
                    return
                self.budget.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)

        tainting.each(evict, keys, self._workers(EVICTION_CONCURRENCY))
        log.info(
            "evictions on %s: %d evicted, %d already gone, %d waiting",
            node_name,
            len(self.outcome.evicted),
            len(self.outcome.gone),
            len(self.outcome.waiting),
        )

    def _left_the_node(self, namespace: str, name: str, node_name: str) -> bool:
        """Whether the pod is no longer one to evict from `node_name`: gone, terminating, or a pod of that
        name bound elsewhere (a StatefulSet's replacement). Unreadable: False, the eviction decides."""
        try:
            pod = self.cluster.pod(namespace, name)
        except CompactorError:
            return False
        if pod is None:
            return True
        terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        return terminating or (pod.get("spec") or {}).get("nodeName") != node_name

    def _node_for_event(self, name: str) -> dict[str, Any]:
        """The node to hang an Event on; its name alone when it cannot be read (the Event still goes)."""
        try:
            return self.cluster.node(name) or {"metadata": {"name": name}}
        except CompactorError:
            return {"metadata": {"name": name}}

    def _check_completion(self, name: str) -> None:
        """Drain done once only DaemonSet, mirror and finished pods are left (pods still terminating count)."""
        if self._stopped is not None:
            return  # the evictions stopped early: whatever is on the node now, this run did not finish the drain
        try:
            pods = [parsing.parse_pod(pod) for pod in self.cluster.pods_on(name)]
        except CompactorError as error:
            log.warning("could not check whether %s is empty: %s", name, error.message)
            return
        left = [pod for pod in pods if not pod.stays_on_node]
        if left:
            return
        self.outcome.drain_completed = True
        node = self._node_for_event(name)
        message = "node-compactor drained the node; it stays cordoned for the Cluster Autoscaler to remove"
        log.info(message, extra={"fields": {"event": "drain-completed", "node": name}})
        self.cluster.event(node, reason="NodeCompactorDrainCompleted", message=message, warning=False, now=self.clock())

    # -- rollback -------------------------------------------------------------------------------

    def _rollback(self, name: str, reason: str) -> None:
        # What a rollback not written leaves: the node as it was, which the next run rolls back again.
        then = f"the node keeps {DRAIN_STARTED_AT} and its cordon, so the next run rolls it back again"
        sent: str | None = None  # the drain-failed-at of a patch whose answer was a 5xx or lost
        for _ in range(CONFLICT_RETRIES):
            try:
                node = self.cluster.node(name)
            except TransientError as error:
                self._skip(f"roll back {name}: {error.message}; {then}")
                return
            if node is None:
                return  # the autoscaler took it after all
            annotations = (node.get("metadata") or {}).get("annotations") or {}
            if DRAIN_STARTED_AT not in annotations:
                if sent is not None and annotations.get(DRAIN_FAILED_AT) == sent:
                    self._rolled_back(name, node, reason, parse_stamp(sent) or self.clock())  # it landed
                return  # not ours (any more): never uncordon a node we did not cordon
            if not self._may_act(f"roll back {name}", then=then):
                return
            now = self.clock()
            patch = {
                "metadata": {
                    "resourceVersion": node["metadata"]["resourceVersion"],
                    "annotations": {DRAIN_STARTED_AT: None, DRAIN_FAILED_AT: format_stamp(now)},
                },
                "spec": {"unschedulable": False},
            }
            try:
                node = self.cluster.patch_node(name, patch)
            except ConflictError:
                sent = sent or format_stamp(now)  # a 5xx's patch may have landed before this 409
                continue  # read it again: still ours, and still to give back?
            except NotFoundError:
                return
            except TransientError as error:
                landed = self._rollback_landed(name, format_stamp(now))
                if landed is not None:
                    self._rolled_back(name, landed, reason, now)
                else:
                    self._skip(f"roll back {name}: {error.message}; {then}")
                return
            except ClusterAccessError as error:
                self._error(f"roll back {name}: {error.message}")
                return
            self._rolled_back(name, node, reason, now)
            return
        self._skip(f"roll back {name}: the node kept changing ({CONFLICT_RETRIES} conflicts); the next run tries again")

    def _rolled_back(self, name: str, node: dict[str, Any], reason: str, now: datetime) -> None:
        self.outcome.rolled_back = True
        self.outcome.given_back.append(name)
        message = f"node-compactor gave the node back (uncordoned): {reason}"
        log.warning(message, extra={"fields": {"event": "rollback", "node": name}})
        self.cluster.event(node, reason="NodeCompactorRollback", message=message, warning=True, now=now)

    def _rollback_landed(self, name: str, stamp: str) -> dict[str, Any] | None:
        """The node, read again, when this run's rollback (`stamp` as its drain-failed-at) is on it."""
        try:
            node = self.cluster.node(name)
        except CompactorError:
            return None
        annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
        if node is None or DRAIN_STARTED_AT in annotations or annotations.get(DRAIN_FAILED_AT) != stamp:
            return None
        return node

    # -- the guards ---------------------------------------------------------------------------

    def _may_act(self, action: str, *, then: str = "this run does not do it; the next run looks again") -> bool:
        """Right before a write only one run may make: the deadline has not passed and the Lease is still ours.

        A renewal the API server keeps failing (5xx) is skipped with `then`, what that leaves, as the reason:
        the Lease is not known lost, but nothing only one run may do is done without proving it."""
        if self.budget.remaining() <= 0:
            self._error(f"{action}: the run's time budget ran out first; nothing more was done")
            return False
        if self.guard is not None:
            try:
                self.guard(action)
            except TransientError as error:
                self._skip(f"{action}: {error.message}; {then}")
                return False
            except CompactorError as error:
                self._error(f"{action}: {error.message}")
                return False
        return True

    def _may_evict(self, node_name: str, key: str) -> str | None:
        """None when the next eviction (of `key`) may go; otherwise why the evictions stopped (for good, in
        this run).

        The cheap checks (`_drain_may_go_on`: the deadline, the node re-read, the Lease renewed) run every
        EVICTIONS_PER_CHECK attempts (a batch) or CHECK_INTERVAL_SECONDS, one worker checking while the
        others wait on the lock, as before. The full proof (`_prove_again`: the whole cluster read again)
        runs with them when it is due:
        - before a pod is tried for the first time once EVICTIONS_PER_CHECK pods were tried for the first
          time since the last proof: a pod no proof made just before its batch covered is never evicted,
          so at most one batch of new pods is ever in flight beyond the last proof, as before;
        - before any attempt, a retry included, once the last proof is older than `_proof_interval()`.
        A retry (after a PDB's 429 or a 5xx) is of a pod the last proof let go; whether the room it
        needs is still there that proof cannot say for ever, so retries are proven again too, on the
        time bound only: docs/drain-states.md "Proving a batch" argues the bound.
        """
        with self._check_lock:
            if self._stopped is not None:
                return self._stopped
            moment = self.budget.monotonic()
            new = key not in self._tried
            self._tried.add(key)
            if self._last_check is None:  # the first batch: the run's plan has just proven it
                self._last_check = self._last_proof = moment
                self._attempts_since_check = 1
                self._new_since_proof = 1
                self._stopped = self._drain_may_go_on(node_name, proven=True)
                return self._stopped
            proof_due = (new and self._new_since_proof >= EVICTIONS_PER_CHECK) or (
                moment - self._last_proof >= self._proof_interval()
            )
            due = (
                proof_due
                or self._attempts_since_check >= EVICTIONS_PER_CHECK
                or moment - self._last_check >= CHECK_INTERVAL_SECONDS
            )
            self._attempts_since_check += 1
            self._new_since_proof += new
            if not due:
                return None
            self._attempts_since_check = 1
            self._last_check = moment
            if proof_due:
                self._last_proof = moment
                self._new_since_proof = int(new)
            self._stopped = self._drain_may_go_on(node_name, proven=not proof_due)
            return self._stopped

    def _proof_interval(self) -> float:
        """How old the last full proof may get before a retry needs a new one: PROOF_INTERVAL_PROOFS times
        what the last one took (the run's own read until one was timed), at least CHECK_INTERVAL_SECONDS."""
        return max(CHECK_INTERVAL_SECONDS, PROOF_INTERVAL_PROOFS * self._proof_seconds)

    def _drain_may_go_on(self, name: str, *, proven: bool) -> str | None:
        """Why the next batch must not go (None: it may): the deadline, the node as it is now (still
        cordoned by us, not opted out), the Lease, and, unless the batch was `proven` by this run's
        plan a moment ago, the planner's question on the cluster as it is now (`_prove_again`)."""
        if self.budget.remaining() <= 0:
            return "the run's time budget ran out; the next run goes on"
        try:
            node = self.cluster.node(name)
        except TransientError as error:
            return self._stop_for_now(name, f"could not re-read the node ({error.message})")
        except CompactorError as error:
            self._error(f"re-read {name} before evicting: {error.message}")
            return f"could not re-read the node ({error.message})"
        if node is None:
            return "the node no longer exists"
        if self.proof_state is not None:
            self.proof_state.node_read(node)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if not (node.get("spec") or {}).get("unschedulable"):
            return self._interrupt(node, "someone else uncordoned the node during the drain")
        if DRAIN_STARTED_AT not in annotations:
            return self._interrupt(node, f"someone else removed {DRAIN_STARTED_AT} from the node during the drain")
        opt_out = inflight.node_opt_out(annotations) if isinstance(annotations, dict) else None
        if opt_out is not None:
            return self._interrupt(node, f"the node was opted out during the drain ({opt_out})")
        if self.guard is not None:
            try:
                self.guard(f"evict pods on {name}")
            except TransientError as error:
                return self._stop_for_now(name, f"could not renew the Lease ({error.message})")
            except CompactorError as error:
                self._error(f"evict pods on {name}: {error.message}")
                return error.message
        if proven or self.proof_state is None:
            return None
        if self.budget.remaining() < self._proof_seconds:
            # A read the budget cuts short is an error that fails the run; without a proof no pod goes anyway.
            return "the run's time budget has less left than proving the next batch takes; the next run goes on"
        return self._prove_again(name, node)

    def _prove_again(self, name: str, node: dict[str, Any]) -> str | None:
        """Take the cluster as it is now (`proof_state`: watched, or read again) and plan the drain under
        way again (`inflight.in_flight`, the planner's own rule 0): the next batch goes only when the answer
        is still "continue {name}", and then only with pods that answer lists."""
        assert self.proof_state is not None
        started = self.budget.monotonic()
        try:
            fresh = self.proof_state.snapshot()
        except TransientError as error:
            return self._stop_for_now(name, f"could not re-read the cluster ({error.message})")
        except CompactorError as error:
            self._error(f"re-read the cluster before evicting more pods on {name}: {error.message}")
            return f"could not re-read the cluster ({error.message})"
        self.outcome.proofs += 1
        running = inflight.in_flight(ClusterView(fresh, self.config), self.clock())
        self._proof_seconds = self.budget.monotonic() - started  # read and asked: what the next bound scales
        decision = running.decision
        if decision is not None and decision.action == "continue-drain" and decision.node == name:
            if decision.held is not None:
                self.outcome.held = decision.reason
                return self._interrupt(node, decision.held, reason="NodeCompactorDrainWaiting")
            self._allowed = frozenset(decision.evictions)
            return None
        if decision is None and name in running.awaiting_removal:
            self._allowed = frozenset()  # emptied meanwhile: nothing is left to evict
            return None
        if decision is not None and decision.node == name:
            return self._interrupt(node, decision.reason)
        if decision is not None:
            why = f"{decision.node} must be dealt with first ({decision.action}: {decision.reason})"
        else:
            why = f"{name} is no longer being drained"
        return self._interrupt(node, why)

    def _stop_for_now(self, name: str, why: str) -> str:
        """Stop the evictions on a transient error before a batch: without the node seen still ours, the
        Lease renewed and the batch proven, no pod goes; the node stays cordoned and the next run goes on."""
        self.outcome.interrupted = why
        self._skip(f"evict pods on {name}: {why}; no more pods are evicted this run, the next run goes on")
        return why

    def _interrupt(self, node: dict[str, Any], why: str, *, reason: str = "NodeCompactorDrainInterrupted") -> str:
        name = (node.get("metadata") or {}).get("name", "")
        self.outcome.interrupted = why
        message = f"node-compactor stopped draining the node: {why}; the pods still on it stay where they are"
        log.warning(message, extra={"fields": {"event": "drain-interrupted", "node": name}})
        self.cluster.event(node, reason=reason, message=message, warning=True, now=self.clock())
        return why

    def _error(self, message: str) -> None:
        with self.outcome._lock:
            self.outcome.errors.append(message)
        log.error(message)


def _no_time() -> float:
    return 0.0


def _pods_apart(pods: Iterable[Pod], node_name: str) -> tuple[list[Pod], list[Pod]]:
    """The pods of other nodes (or none), and those of `node_name`, each in their order."""
    others: list[Pod] = []
    mine: list[Pod] = []
    for pod in pods:
        (mine if pod.node_name == node_name else others).append(pod)
    return others, mine


@dataclass(frozen=True, slots=True)
class _Stamp:
    """A time annotation a run puts on nodes and takes off them: its key, how a skipped write names it, and the
    Event its first write emits."""

    key: str
    what: str
    event_reason: str
    event_message: str  # with {value}, the time written


_MARK = _Stamp(UNDERUTILIZED_SINCE, "mark", "Underutilized", "node-compactor marked the node underutilized at {value}")
_REPLACEABLE = _Stamp(
    REPLACEABLE_SINCE,
    REPLACEABLE_SINCE,
    "Replaceable",
    "node-compactor found cheaper capacity for the node's pods at {value}: it may replace the node once it has "
    "waited neededMarkedTimeSeconds",
)


def _mark_not_to_write(node: dict[str, Any] | None, value: str | None, key: str = UNDERUTILIZED_SINCE) -> str | None:
    """None when the annotation change (`value` for `key`, the mark by default; None removes it) is still to be
    written on `node` as just read; otherwise why not: "" when there is nothing left to do (gone, or the
    annotation already as wanted), else the reason the write is skipped."""
    if node is None:
        return ""  # the node went away; nothing to mark
    metadata = node.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    if (node.get("spec") or {}).get("unschedulable") and DRAIN_STARTED_AT not in annotations:
        return "someone else cordoned the node meanwhile; a node a person cordoned is never written"
    if value is None:
        return "" if key not in annotations else None
    if parse_stamp(annotations.get(key)) is not None:
        return ""  # written meanwhile (another run): a readable time is kept; an unreadable one is replaced
    return None
