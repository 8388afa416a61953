"""What acts on the cluster besides the Cluster Autoscaler: nothing, estafette's algorithm, or node-compactor.

- `ClusterAutoscalerAlone`: GKE as it is, with the default `balanced`
  autoscaling profile; `optimize-utilization` is the same strategy on a
  cluster whose autoscaler and scheduler run GKE's other profile (the runner
  sets them up).
- `Estafette`: estafette-k8s-node-compactor's loop as published (main.go and
  its README): every 5 minutes (±25% jitter), per enabled pool, mark nodes
  whose cpu request ratio is under the limit; when the pool's underutilized
  nodes (not in progress, older than the minimum age) number at least
  `required x (in progress + 1)`, pick the lowest-cpu node marked for the
  needed time with no pod that prevents removal (safe-to-evict false; local
  storage or no replicating owner outside kube-system), cordon it with its
  state annotation and DELETE its pods outside kube-system that no
  DaemonSet owns. No fit check, no PodDisruptionBudget. It reads the
  matching fields of node-compactor's configuration (the format it shares).
- `NodeCompactor`: the real planner and the live executor every 5 minutes,
  through `port.SimulatedCluster`, restarting Deployments through
  `rollouts.SimulatedDeployments` in pools with surgeSingleReplicas, and
  writing node replacement's placeholders and annotations through the same
  port (the planner reads placeholders apart, as a live run does, and prices
  nodes with the configuration's price table, as a live run does).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from compactor.actuation import executor as live
from compactor.core import planner, proof
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import Snapshot
from compactor.core.plan import Plan
from compactor.core.prices import pricing
from compactor.core.timing import format_stamp
from compactor.errors import RunFailedError
from compactor.settings.config import Config
from compactor.simulation import prices
from compactor.simulation.port import SimulatedCluster
from compactor.simulation.rollouts import Rollouts, SimulatedDeployments
from compactor.simulation.world import World

ESTAFETTE_STATE = "estafette.io/node-compactor-state"
REPLICATING_OWNERS = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})
SYSTEM_NAMESPACE = "kube-system"
RUN_INTERVAL = timedelta(minutes=5)
ACTIONS = frozenset({"drain", "continue-drain", "rollback"})  # decisions that act; any other holds back
FAILED_RUN = "failed-run"
NO_FIT_SHOWN = 5
# A node's reason when one of its pods fits nowhere else (`compactor.core.fit`'s wording).
_FITS_NOWHERE = re.compile(r"pod (?P<pod>\S+) \(.*?\) fits on no other node \((?P<why>[^)]*)\)")


@dataclass(frozen=True, slots=True)
class NoFit:
    """A pod that kept nodes from being drained because it fitted on no other node."""

    pod: str  # namespace/name
    runs: int  # the runs held by no-fit that named it
    why: str  # the latest reason: what the other nodes lacked


class Strategy(Protocol):
    name: str
    failures: list[str]  # problems of runs that failed
    # What the latest run decided: an action of the plan, or the gate that held it; None when there is no planner.
    decision: str | None

    def act(self, now: datetime) -> None: ...

    def due(self, now: datetime) -> bool:
        """Whether `act(now)` would do anything: a run is due."""
        ...

    def summary(self) -> dict[str, int]: ...

    def no_fit(self) -> list[NoFit]: ...


class ClusterAutoscalerAlone:
    decision: str | None = None

    def __init__(self, name: str = "ca-alone") -> None:
        self.name = name
        self.failures: list[str] = []

    def act(self, now: datetime) -> None:
        return None

    def due(self, now: datetime) -> bool:
        return False

    def summary(self) -> dict[str, int]:
        return {}

    def no_fit(self) -> list[NoFit]:
        return []


class ClassPriorities(ClusterAutoscalerAlone):
    """The Cluster Autoscaler with ComputeClass priorities and active migration (`migration`): nothing acts
    besides it; its summary is what the migration did (`counts`, read at the end)."""

    def __init__(self, name: str, counts: Callable[[], dict[str, int]]) -> None:
        super().__init__(name)
        self._counts = counts

    def summary(self) -> dict[str, int]:
        return self._counts()


@dataclass
class Estafette:
    world: World
    config: Config
    seed: int
    name: str = "estafette"
    marks: dict[str, datetime] = field(default_factory=dict)
    next_run: datetime | None = None
    nodes_picked: int = 0
    failures: list[str] = field(default_factory=list)
    decision: str | None = None

    def __post_init__(self) -> None:
        self._jitter = random.Random(f"{self.seed}:estafette")

    def due(self, now: datetime) -> bool:
        return self.next_run is None or now >= self.next_run

    def act(self, now: datetime) -> None:
        if not self.due(now):
            return
        seconds = RUN_INTERVAL.total_seconds()
        self.next_run = now + timedelta(seconds=seconds * 0.75 + self._jitter.random() * seconds * 0.5)
        view = self.world.view(now, self.config)
        for pool_name in sorted(name for name in view.nodes_by_pool if name is not None):
            self._pool(view, pool_name, now)

    def _pool(self, view: ClusterView, pool_name: str, now: datetime) -> None:
        pool = self.config.enabled_pool(pool_name)
        if pool is None or pool.cpu_limit is None:
            return
        states = sorted(view.nodes_by_pool[pool_name], key=lambda s: s.name)
        in_progress = [s for s in states if ESTAFETTE_STATE in s.node.annotations]
        under = []
        for state in states:
            ratio = state.cpu_ratio if state.cpu_ratio is not None else 1.0
            progressing = ESTAFETTE_STATE in state.node.annotations
            if ratio < pool.cpu_limit and not progressing:
                self.marks.setdefault(state.name, now)
                created = state.node.created
                if created is not None and (now - created).total_seconds() > pool.minimum_node_age_seconds:
                    under.append(state)
            else:
                self.marks.pop(state.name, None)
        if len(under) < pool.required_underutilized * (len(in_progress) + 1):
            return
        candidates = [
            s
            for s in under
            if (now - self.marks[s.name]).total_seconds() >= pool.needed_marked_seconds and not _prevents_removal(s)
        ]
        if not candidates:
            return
        pick = min(candidates, key=lambda s: (s.cpu_ratio or 0.0, s.name))
        state_value = json.dumps({"scaleDownInProgress": True, "lastUpdated": format_stamp(now)})
        patch = {"spec": {"unschedulable": True}, "metadata": {"annotations": {ESTAFETTE_STATE: state_value}}}
        self.world.patch_node(pick.name, patch)
        self.nodes_picked += 1
        self.marks.pop(pick.name, None)
        for pod in pick.pods:
            if pod.controller_kind == "DaemonSet" or pod.namespace == SYSTEM_NAMESPACE:
                continue
            self.world.delete_pod(pod.key, actor=self.name, at=now)

    def summary(self) -> dict[str, int]:
        return {"nodesCordoned": self.nodes_picked}

    def no_fit(self) -> list[NoFit]:
        return []


def _prevents_removal(state: NodeState) -> bool:
    """estafette's hasPodWhichPreventsNodeRemoval."""
    for pod in state.pods:
        if pod.safe_to_evict is False:
            return True
        daemon = pod.controller_kind == "DaemonSet"
        if pod.namespace != SYSTEM_NAMESPACE and not daemon:
            if pod.local_storage and pod.safe_to_evict is not True:
                return True
            if pod.controller_kind not in REPLICATING_OWNERS:
                return True
    return False


@dataclass
class NodeCompactor:
    world: World
    config: Config
    settle: Callable[[datetime, datetime], None]  # (step time, moment): the cluster goes on during a run
    budget_seconds: float
    name: str = "node-compactor"
    # The Deployments the executor restarts in pools with surgeSingleReplicas; None: no restart is made.
    rollouts: Rollouts | None = None
    next_run: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    decision: str | None = None
    # Runs held by no-fit: per pod that fitted nowhere, how many runs named it and the latest reason.
    no_fit_pods: dict[str, tuple[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._prices = prices.table_for(self.config)
        # The last run's fit proofs, and what its snapshot was made of (`_proofs_for`).
        self._proofs = proof.Memo()
        self._proofs_content: tuple[object, ...] | None = None

    def _proofs_for(self, snapshot: Snapshot) -> proof.Memo:
        """The last run's proofs while the cluster is the same: nothing changed in the world since, and its
        budgets and workloads read the same (pods turning Ready move them without a change); else none."""
        content = (self.world.changes, snapshot.pdbs, snapshot.deployments, snapshot.replica_sets)
        if content != self._proofs_content:
            self._proofs, self._proofs_content = proof.Memo(), content
        return self._proofs

    def due(self, now: datetime) -> bool:
        return self.next_run is None or now >= self.next_run

    def act(self, now: datetime) -> None:
        if not self.due(now):
            return
        self.next_run = now + RUN_INTERVAL
        # What a live run reads: placeholder pods apart from the others. Without any, the world's view made
        # from its last one for this configuration (`World.view`) is that snapshot's.
        view = None if self.world.has_placeholders else self.world.view(now, self.config)
        snapshot = view.snapshot if view is not None else self.world.snapshot(now, placeholders_apart=True)
        proofs = self._proofs_for(snapshot)
        plan = planner.plan(snapshot, self.config, now=now, prices=self._prices, proofs=proofs, view=view)
        action = plan.decision.action
        self.decision = action if action != "none" else (plan.held_by or "none")
        if plan.held_by == "no-fit":
            self._note_no_fit(plan)
        port = SimulatedCluster(
            self.world,
            actor=self.name,
            run_start=now,
            settle=lambda moment: self.settle(now, moment),
            budget_seconds=self.budget_seconds,
        )
        port.expect_evictions(plan.decision.evictions)
        run = live.Executor(
            port,
            self.config,
            clock=lambda: now,
            budget=live.Budget(deadline=self.budget_seconds, monotonic=port.monotonic, sleep=port.sleep),
            dry_run=self.config.dry_run,
            deployments=SimulatedDeployments(port, self.rollouts) if self.rollouts is not None else None,
            restart_wait=False,  # no time passes inside a run: the next run finds the rollout done
            replacements=port,
            prices=self._prices,
            proofs=proofs,
            threads=False,  # the world answers from memory: nothing to overlap
        )
        self._count("runs")
        try:
            with _quiet(live.log):
                outcome = run.execute(plan, snapshot)
        except RunFailedError as error:
            self._count("failedRuns")
            self.failures.extend(error.problems)
            self.decision = FAILED_RUN
            return
        port.check_consumed()
        self._count("drainsStarted", outcome.drain_started)
        self._count("drainsCompleted", outcome.drain_completed)
        self._count("rollbacks", outcome.rolled_back)
        self._count("staleDecisions", outcome.stale is not None)
        if outcome.restarted:
            self.counts["rollingRestarts"] = self.counts.get("rollingRestarts", 0) + len(outcome.restarted)
        written = outcome.replacement
        started = plan.replacement
        if written.created and started is not None and started.step == "create":
            self.world.recorder.replacements.append(
                {
                    "at": format_stamp(now),
                    "nodes": list(started.nodes),
                    "target": started.target_pool,
                    "newNodes": started.new_nodes,
                    "spot": pricing.is_spot(dict(started.node_selector)),
                    "removedPricePerHour": started.removed_price_per_hour,
                    "pricePerHour": started.price_per_hour,
                    "savingsPerHour": started.savings_per_hour,
                }
            )
        self._count("replacementsStarted", bool(written.created))
        self._add("placeholdersCreated", len(written.created))
        self._count("placeholdersDeleted", bool(written.deleted))
        self._count("replacementsGivenUp", plan.replacement is not None and plan.replacement.step == "give-up")
        self._add("nodesMarkedReplaced", len(written.marked_replaced))

    def _count(self, what: str, happened: bool = True) -> None:
        if happened:
            self.counts[what] = self.counts.get(what, 0) + 1

    def _add(self, what: str, amount: int) -> None:
        if amount:
            self.counts[what] = self.counts.get(what, 0) + amount

    def summary(self) -> dict[str, int]:
        return dict(self.counts)

    def no_fit(self) -> list[NoFit]:
        """The pods most often named by runs held back by `no-fit`, most named first (at most `NO_FIT_SHOWN`)."""
        ranked = sorted(self.no_fit_pods.items(), key=lambda item: (-item[1][0], item[0]))
        return [NoFit(pod, runs, why) for pod, (runs, why) in ranked[:NO_FIT_SHOWN]]

    def _note_no_fit(self, plan: Plan) -> None:
        """For a run held by `no-fit`: each pod that keeps a node from being drained because it fits on no
        other node (the node's first reason), counted once a run, with the latest reason given."""
        named: dict[str, str] = {}
        for node in plan.nodes:
            found = _FITS_NOWHERE.match(node.blockers[0]) if node.blockers else None
            if found is not None:
                named.setdefault(found["pod"], found["why"])
        for pod, why in named.items():
            runs, _ = self.no_fit_pods.get(pod, (0, why))
            self.no_fit_pods[pod] = (runs + 1, why)


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """The executor logs for operators; a simulation of hundreds of runs must not print them."""
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was
