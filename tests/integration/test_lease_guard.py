"""One drain at a time under a slow API: the Lease and the run's deadline guard every write.

The runs here share a scaled clock: one real second is SCALE seconds of run
time, so a list page the fake API answers 0.9 s late is 90 s late for the
run, longer than its 30 s budget and its 60 s Lease, without the test
waiting that long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor import report, service
from compactor.core.model import DRAIN_STARTED_AT, UNDERUTILIZED_SINCE
from compactor.core.timing import format_stamp
from compactor.errors import CompactorError, LeaseHeldError, RunFailedError
from compactor.kube.client import micro_time
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import (
    NOW,
    TOKEN,
    FakeTime,
    assert_invariants,
    connector_for,
    cordoned,
    env_with,
    event_reasons,
    light_cluster,
    run_once,
)

SCALE = 50.0  # run seconds per real second
BUDGET = "30"  # the shortest budget a run accepts; its Lease lasts 60 s


@dataclass
class ScaledTime:
    """Wall clock and monotonic clock of the runs, both moving SCALE times faster than real time."""

    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return (time.perf_counter() - self.started) * SCALE

    def clock(self) -> datetime:
        return NOW + timedelta(seconds=self.elapsed())

    def monotonic(self) -> float:
        return 1000.0 + self.elapsed()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds / SCALE)


def scaled_run(api: FakeApiServer, scaled: ScaledTime, results: list[Any]) -> None:
    try:
        results.append(
            service.run(
                env_with(COMPACTOR_RUN_BUDGET_SECONDS=BUDGET),
                connector=connector_for(api),
                clock=scaled.clock,
                monotonic=scaled.monotonic,
                sleep=scaled.sleep,
                first_backoff=1.0,
            )
        )
    except CompactorError as error:
        results.append(error)


def lease_holder(api: FakeApiServer) -> str:
    """The holder identity this run wrote when it took the Lease (the first Lease write)."""
    taken = next(w for w in api.writes_of("Lease") if w.method in ("POST", "PUT"))
    holder: str = taken.body["spec"]["holderIdentity"]
    return holder


def most_nodes_draining_at_once(
    api: FakeApiServer, initially: set[str] | None = None, *, homes: Mapping[str, str] | None = None
) -> int:
    """Replays the writes in the order the API server took them: the most nodes ever carrying drain-started-at.

    With `homes` (pod name -> its node before the runs) a node stops counting once the last of its
    pods was evicted: it is then awaiting removal, not being evicted, and DESIGN rule 0 lets a new
    drain start beside it (`maxNodesAwaitingRemoval`). What must never happen is two nodes with pods
    still to move, both carrying drain-started-at."""
    draining = set(initially or ())
    left: dict[str, int] = {}
    for node in (homes or {}).values():
        left[node] = left.get(node, 0) + 1

    def evicting() -> int:
        return sum(1 for name in draining if homes is None or left.get(name, 0) > 0)

    most = evicting()
    for write in api.writes:
        if write.kind == "Eviction" and homes is not None and write.name in homes:
            left[homes[write.name]] -= 1
            continue
        if write.kind != "Node" or write.method != "PATCH":
            continue
        annotations = ((write.body or {}).get("metadata") or {}).get("annotations") or {}
        if DRAIN_STARTED_AT not in annotations:
            continue
        if annotations[DRAIN_STARTED_AT] is None:
            draining.discard(write.name)
        else:
            draining.add(write.name)
        most = max(most, evicting())
    return most


def two_candidates(api: FakeApiServer, *, n1_marked_at: datetime) -> None:
    """n1 (one pod) becomes a candidate only once marked for 300 s; n2 (two pods) always is; n3 has room for both."""
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: format_stamp(n1_marked_at)}))
    api.add(k8s.node("n2", annotations={UNDERUTILIZED_SINCE: "2026-11-21T11:00:00Z"}))
    api.add(k8s.node("n3"))
    api.add(k8s.pod("one-a1", node="n1", cpu="200m"))
    api.add(k8s.pod("two-b1", node="n2", cpu="300m"))
    api.add(k8s.pod("two-b2", node="n2", cpu="300m"))
    api.add(k8s.pod("busy-c1", node="n3", cpu="2500m"))


def test_a_run_slowed_past_its_lease_never_drains_a_second_node(api: FakeApiServer) -> None:
    # The red-team case: run A's PDB list comes back 120 s late. Meanwhile run B finds A's 60 s
    # Lease expired, takes it and drains n2 (n1 is not marked long enough yet at B's time). A then
    # has a stale view in which n1 has become the cheapest candidate and nothing is draining.
    two_candidates(api, n1_marked_at=NOW + timedelta(seconds=100) - timedelta(seconds=300))
    api.add_fault(Fault(method="GET", path_regex=r"/poddisruptionbudgets$", delay=120 / SCALE))
    scaled = ScaledTime()
    results_a: list[Any] = []
    results_b: list[Any] = []
    run_a = threading.Thread(target=scaled_run, args=(api, scaled, results_a))
    run_a.start()
    time.sleep(80 / SCALE)
    run_b = threading.Thread(target=scaled_run, args=(api, scaled, results_b))
    run_b.start()
    run_a.join(timeout=30)
    run_b.join(timeout=30)

    assert isinstance(results_b[0], service.RunResult) and results_b[0].outcome.drain_started
    assert most_nodes_draining_at_once(api) == 1
    assert [name for name in ("n1", "n2", "n3") if cordoned(api, name)] == [results_b[0].report["decision"]["node"]]
    outcome_a = results_a[0]
    why = outcome_a.outcome.stale if isinstance(outcome_a, service.RunResult) else outcome_a.message
    assert why is not None and "time budget ran out" in why


def test_a_run_whose_lease_was_taken_over_does_not_cordon(api: FakeApiServer) -> None:
    light_cluster(api)

    def take_over() -> None:
        api.add(k8s.lease(holder="another-run", renew_time=micro_time(NOW), duration_seconds=60))

    # Before the cordon (the re-validation reads the PDBs last), another run now holds the Lease.
    api.on_request("GET", r"/poddisruptionbudgets$", take_over, times=2)
    with pytest.raises(RunFailedError) as failed:
        run_once(api)
    assert failed.value.problems == [
        "cordon n1: Lease kube-system/node-compactor is now held by another-run, not this run "
        f"({lease_holder(api)}); this run stopped acting"
    ]
    assert not cordoned(api, "n1")
    assert api.evictions == []


def test_evictions_stop_once_the_lease_is_lost(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: "2026-11-21T11:00:00Z"}))
    api.add(k8s.node("n2"))
    for index in range(12):
        api.add(k8s.pod(f"web-{index:02d}", node="n1", cpu="100m"))

    def take_over() -> None:
        api.add(k8s.lease(holder="another-run", renew_time=micro_time(NOW), duration_seconds=60))

    api.on_request("POST", r"/eviction$", take_over)
    with pytest.raises(RunFailedError) as failed:
        run_once(api)
    assert "evict pods on n1: Lease kube-system/node-compactor is now held by another-run" in failed.value.problems[0]
    assert len([e for e in api.evictions if e.status == 201]) == 8, "the first batch went; no batch after it"
    report = failed.value.report
    assert report is not None and len(report["outcome"]["waiting"]) == 4
    assert report["outcome"]["drainCompleted"] is False


def test_the_run_renews_its_lease_with_micro_times_before_acting(api: FakeApiServer) -> None:
    light_cluster(api)
    run_once(api)  # NOW has no microseconds: isoformat() would have written none, and the server refuses that
    lease_writes = [w for w in api.writes_of("Lease") if w.method in ("POST", "PUT")]
    assert len(lease_writes) >= 3, "taken, renewed before the cordon and before the evictions, released"
    for write in lease_writes:
        for key in ("acquireTime", "renewTime"):
            value = write.body["spec"].get(key)
            assert value is None or value.endswith(".000000Z"), value


def test_a_run_past_its_deadline_before_the_cordon_does_not_cordon(api: FakeApiServer) -> None:
    light_cluster(api)
    fake_time = FakeTime()

    pdb_reads: list[int] = []

    def time_passes() -> None:
        pdb_reads.append(1)
        if len(pdb_reads) == 2:  # the re-validation's last read: it took longer than the whole budget
            fake_time.sleep(120)

    api.on_request("GET", r"/poddisruptionbudgets$", time_passes, times=2)
    with pytest.raises(RunFailedError) as failed:
        run_once(api, time=fake_time)
    assert failed.value.problems == ["cordon n1: the run's time budget ran out first; nothing more was done"]
    assert not cordoned(api, "n1")


def test_a_lease_held_by_another_run_until_far_in_the_future_is_respected(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add(k8s.lease(holder="another-run", renew_time="9999-12-31T23:59:59.000000Z", duration_seconds=3600))
    with pytest.raises(LeaseHeldError, match="another-run"):
        run_once(api)
    assert not cordoned(api, "n1")


# -- the invariant as a property ---------------------------------------------------------------------


DELAYED_PATHS = [
    r"/api/v1/nodes$",
    r"/api/v1/pods$",
    r"/poddisruptionbudgets$",
    r"/leases/node-compactor$",
    r"/api/v1/nodes/n\d$",
    r"/eviction$",
]
FAULTS = [
    None,
    Fault(method="POST", path_regex=r"/eviction$", status=429, times=3),
    Fault(method="POST", path_regex=r"/eviction$", status=503, times=-1),
    Fault(method="POST", path_regex=r"/eviction$", drop_connection=True, times=2),
    Fault(method="PUT", path_regex=r"/leases/", status=500, times=1),
    Fault(method="PATCH", path_regex=r"/api/v1/nodes/", status=409, times=1),
    Fault(method="GET", path_regex=r"/api/v1/pods$", status=500, times=1),
]


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    delays=st.lists(
        st.tuples(st.sampled_from(DELAYED_PATHS), st.floats(min_value=0, max_value=90)), min_size=1, max_size=3
    ),
    fault=st.sampled_from(FAULTS),
    second_start=st.floats(min_value=0, max_value=80),
    n1_marked_after=st.floats(min_value=0, max_value=120),
)
def test_at_most_one_node_ever_carries_drain_started_at_under_random_delays(
    delays: list[tuple[str, float]], fault: Fault | None, second_start: float, n1_marked_after: float
) -> None:
    with FakeApiServer(token=TOKEN) as api:
        two_candidates(api, n1_marked_at=NOW + timedelta(seconds=n1_marked_after) - timedelta(seconds=300))
        homes = {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in api.objects("Pod")}
        for path, delay in delays:
            api.add_fault(Fault(path_regex=path, delay=delay / SCALE))
        if fault is not None:
            api.add_fault(fault)
        scaled = ScaledTime()
        results: list[Any] = []
        first = threading.Thread(target=scaled_run, args=(api, scaled, results))
        first.start()
        time.sleep(second_start / SCALE)
        second = threading.Thread(target=scaled_run, args=(api, scaled, results))
        second.start()
        first.join(timeout=30)
        second.join(timeout=30)
        assert len(results) == 2, "both runs ended"
        assert most_nodes_draining_at_once(api, homes=homes) <= 1
        assert_invariants(api)


def test_the_uncordon_check_reads_the_live_node_not_the_snapshot(api: FakeApiServer) -> None:
    """A person uncordons the node right after the first eviction: the run stops at the next batch."""
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: "2026-11-21T11:00:00Z"}))
    api.add(k8s.node("n2"))
    for index in range(12):
        api.add(k8s.pod(f"web-{index:02d}", node="n1", cpu="100m"))

    def person_uncordons() -> None:
        node = api.get("Node", "n1")
        assert node is not None
        node["spec"]["unschedulable"] = False
        api.add(node)

    api.on_request("POST", r"/eviction$", person_uncordons)
    result = run_once(api)
    outcome = result.report["outcome"]
    assert outcome["interrupted"] == "someone else uncordoned the node during the drain"
    assert outcome["drainCompleted"] is False
    assert len(outcome["evicted"]) == 8 and len(outcome["waiting"]) == 4
    assert all("uncordoned" in why for why in outcome["waiting"].values())
    assert "Evictions stopped: someone else uncordoned the node" in report.outcome_lines(outcome)
    assert "NodeCompactorDrainInterrupted" in event_reasons(api, "n1")
    assert "NodeCompactorDrainCompleted" not in event_reasons(api, "n1")
    assert not cordoned(api, "n1"), "the person's uncordon stands"
    # The next run gives the node back as docs/running.md says (drain-failed-at, no drain-started-at).
    follow_up = run_once(api, at=NOW + timedelta(seconds=60))
    assert follow_up.report["decision"]["action"] == "rollback"
