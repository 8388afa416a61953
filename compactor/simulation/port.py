"""`ClusterPort` over the simulated world: the live executor runs unchanged against it.

Node and pod objects go out as Kubernetes JSON, node patches go through the
world's merge patch with its resourceVersion precondition (ConflictError,
NotFoundError as the API client raises them: `compactor.kube.answers`),
evictions through the world's Eviction API, Events into the world's log. It
is node replacement's `PlaceholderPort` too: a created pod goes through the
world's admission (a placeholder's PriorityClass gives it priority -10 and
preemptionPolicy Never) and waits, Pending, for the scheduler and the Cluster
Autoscaler; a deleted placeholder is gone at once
(terminationGracePeriodSeconds 0).

Time inside a run. The executor evicts with a thread pool and retries a
refused eviction with backoff inside its budget, while the rest of the
cluster goes on: replacements are created, scheduled and become Ready, so a
retry that a PodDisruptionBudget refused may succeed seconds later. Threads
must not decide the outcome, so on the first eviction of a run the port
works out the run's whole eviction timeline in virtual time, as the
executor's pool would play it out (`EVICTION_CONCURRENCY` workers taking
pods in order; after a refusal, the executor's backoff, doubling from
`FIRST_BACKOFF_SECONDS` up to `MAX_BACKOFF_SECONDS`, while the budget lasts),
settling the cluster at each moment an attempt happens. Each `evict` call
then gets its precomputed answer whatever thread makes it, and the budget's
clock (`monotonic`, `sleep`) reads the time of the calling thread's attempt,
so the executor takes exactly the decisions the timeline assumed. The
simulator runs the executor without threads (`threads=False`: one pod after
another, each with its own attempts), which the timeline answers the same.
`check_consumed` proves it after the run.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from compactor.actuation import executor
from compactor.kube.answers import EvictionResult, NotFoundError
from compactor.simulation import objects
from compactor.simulation.world import World

TERMINAL = ("evicted", "gone", "failed")


class SimulationError(Exception):
    """The model and the executor disagree; a bug in the simulator, never a finding."""


class SimulatedCluster:
    def __init__(
        self,
        world: World,
        *,
        actor: str,
        run_start: datetime,
        settle: Callable[[datetime], None],
        budget_seconds: float,
        first_backoff: float = executor.FIRST_BACKOFF_SECONDS,
    ) -> None:
        self.world = world
        self.actor = actor
        self.run_start = run_start
        self.settle = settle
        self.budget_seconds = budget_seconds
        self.first_backoff = first_backoff
        self._lock = threading.RLock()
        self._local = threading.local()
        self._order: list[str] = []
        self._timeline: dict[str, deque[tuple[float, EvictionResult]]] | None = None

    # -- ClusterPort ------------------------------------------------------------------------------

    def node(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.world.nodes.get(name)
            return objects.json_copy(obj) if obj is not None else None

    def pods_on(self, node_name: str) -> list[dict[str, Any]]:
        with self._lock:
            # The world replaces objects on change, never edits them: handing them out is safe.
            return [self.world.pods[key] for key in self.world.pods_on(node_name)]

    def pdbs(self) -> list[dict[str, Any]]:
        with self._lock:
            return self.world.pdb_objects(self.run_start)

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return objects.json_copy(self.world.patch_node(name, patch))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.world.pods.get(f"{namespace}/{name}")
            return objects.json_copy(obj) if obj is not None else None

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return objects.json_copy(self.world.patch_pod(f"{namespace}/{name}", patch))

    def evict(self, namespace: str, name: str) -> EvictionResult:
        key = f"{namespace}/{name}"
        with self._lock:
            if self._timeline is None:
                self._timeline = self._play(self._order)
            answers = self._timeline.get(key)
            if not answers:
                raise SimulationError(f"the executor evicted {key}, which the run's eviction timeline did not expect")
            moment, result = answers.popleft()
        self._local.time = moment
        return result

    # -- PlaceholderPort ---------------------------------------------------------------------------

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return objects.json_copy(self.world.create_pod(namespace, body, at=self.run_start))

    def delete_pod(self, namespace: str, name: str) -> None:
        """A DELETE: a placeholder goes as no disruption; any other pod (the executor deletes none) as one."""
        key = f"{namespace}/{name}"
        with self._lock:
            if key not in self.world.pods:
                raise NotFoundError(f"pods {key!r} not found")
            if self.world.is_placeholder(key):
                self.world.delete_placeholder(key, self.run_start)
            else:
                self.world.delete_pod(key, actor=self.actor, at=self.run_start)

    def event(self, node: Any, *, reason: str, message: str, warning: bool, now: datetime) -> None:
        name = ((node or {}).get("metadata") or {}).get("name", "")
        with self._lock:
            self.world.event(now, name, reason, message)

    # -- the run's clock ----------------------------------------------------------------------------

    def monotonic(self) -> float:
        """Seconds into the run of the calling thread's latest eviction attempt."""
        value: float = getattr(self._local, "time", 0.0)
        return value

    def sleep(self, seconds: float) -> None:
        self._local.time = self.monotonic() + seconds

    # -- the eviction timeline ----------------------------------------------------------------------

    def expect_evictions(self, keys: Sequence[str]) -> None:
        """The pods this run will evict, in the executor's order (the plan's `evictions`)."""
        self._order = list(keys)
        self._timeline = None

    def check_consumed(self) -> None:
        if self._timeline is None:
            return
        left = sorted(key for key, answers in self._timeline.items() if answers)
        if left:
            raise SimulationError(f"the executor stopped evicting {', '.join(left)} earlier than the timeline")

    def _play(self, order: list[str]) -> dict[str, deque[tuple[float, EvictionResult]]]:
        workers = min(executor.EVICTION_CONCURRENCY, len(order))
        index = {key: position for position, key in enumerate(order)}
        queue: list[tuple[float, int, str]] = [(0.0, index[key], key) for key in order[:workers]]
        heapq.heapify(queue)
        waiting = deque(order[workers:])
        answers: dict[str, deque[tuple[float, EvictionResult]]] = {key: deque() for key in order}
        attempts: dict[str, int] = {}
        settled = 0.0
        while queue:
            moment, position, key = heapq.heappop(queue)
            if moment > settled:
                self.settle(self.run_start + timedelta(seconds=moment))
                settled = moment
            result = self.world.evict(key, actor=self.actor, at=self.run_start + timedelta(seconds=moment))
            answers[key].append((moment, result))
            finished = result.status in TERMINAL
            if not finished:
                attempts[key] = attempts.get(key, 0) + 1
                delay = min(self.first_backoff * 2 ** (attempts[key] - 1), executor.MAX_BACKOFF_SECONDS)
                remaining = self.budget_seconds - executor.WRAP_UP_SECONDS - moment
                if remaining < delay:
                    finished = True
                else:
                    heapq.heappush(queue, (moment + delay, position, key))
            if finished and waiting:
                following = waiting.popleft()
                heapq.heappush(queue, (moment, index[following], following))
        return answers
