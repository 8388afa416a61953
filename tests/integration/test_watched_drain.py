"""A drain's later batches proven on the run's read kept current by watches (issue 35), on the fake API server.

The run lists the cluster once; when the first later proof is due it watches nodes, unfinished pods and
PodDisruptionBudgets from that read's resourceVersions, and each proof stands on the watched state once
it shows every eviction the run made (docs/drain-states.md "How fresh a proof's state is"). A broken
watch (410 Gone, a dropped connection, a stall, a lost event a bookmark gives away) costs one fresh
read, counted in the report's `watch`, and the drain goes on as before. The invariants of
`conftest.assert_invariants` hold in every test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from kubernetes import client

from compactor.kube import watching
from compactor.kube.client import Cluster
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.integration.conftest import CONFIG, cordoned, env_with, run_once
from tests.integration.test_drain_safety import cluster_with_room, evicted_from

FULL_POD_LIST = "/api/v1/pods"


def full_reads(api: FakeApiServer) -> int:
    """Lists of every unfinished pod (each full read of the cluster makes exactly one such list's first page)."""
    return len(
        [
            r
            for r in api.requests
            if r.method == "GET"
            and r.path == FULL_POD_LIST
            and "watch" not in r.query
            and "continue" not in r.query
            and r.query.get("limit") != "1"
            and "spec.nodeName" not in r.query.get("fieldSelector", "")
        ]
    )


def watches_of(api: FakeApiServer, path: str) -> int:
    return len([r for r in api.requests if r.method == "GET" and r.path == path and "watch" in r.query])


@pytest.fixture
def watched(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> FakeApiServer:
    """The fake serving watches, with bookmarks every 0.2 s; a watch silent for 2 s is watched again, and a
    proof waits at most 3 s for the watched state to show the run's evictions."""
    api.serve_watches("on")
    api.watch_bookmarks(0.2)
    monkeypatch.setattr(watching, "STALL_SECONDS", 2.0)
    monkeypatch.setattr(watching, "CONFIRM_SECONDS", 3.0)
    return api


def test_a_long_drain_proves_its_later_batches_on_the_watched_state_after_one_read(watched: FakeApiServer) -> None:
    api = watched
    cluster_with_room(api, pods=20, cpu="100m", used="2")
    api.recreate_evicted(0)
    result = run_once(api)
    assert result.outcome.drain_completed
    assert len(result.outcome.evicted) == 20
    # The same two proofs as with a read before each (test_drain_safety), but the cluster was listed once.
    assert result.outcome.proofs == 2
    assert full_reads(api) == 1
    watch = result.report["watch"]
    assert (watch["proofs"], watch["freshReads"], watch["fallbacks"]) == (2, 0, [])
    assert watch["events"] > 0 and watch["bytesOnWire"] > 0
    assert watches_of(api, "/api/v1/pods") == 1 and watches_of(api, "/api/v1/nodes") == 1


def test_a_run_that_only_plans_reads_the_cluster_once_and_watches_nothing(watched: FakeApiServer) -> None:
    api = watched
    cluster_with_room(api, pods=20, cpu="100m", used="2")
    result = run_once(api, dry_run=True)
    assert result.report["decision"]["action"] == "drain"
    assert full_reads(api) == 1
    assert "watch" not in result.report
    assert not [r for r in api.requests if "watch" in r.query]


def test_a_drain_of_one_batch_watches_nothing(watched: FakeApiServer) -> None:
    api = watched
    cluster_with_room(api, pods=6, cpu="100m", used="2")
    result = run_once(api)
    assert len(result.outcome.evicted) == 6
    assert full_reads(api) == 1
    assert not [r for r in api.requests if "watch" in r.query]


def on_eviction(api: FakeApiServer, action: Callable[[], None], *, once_watched: bool) -> None:
    """`action` once, before an eviction is handled: the drain's first (`once_watched=False`), or the first
    after the run's watches were opened.

    Named by moment, not by pod: the executor's workers reach their checks in no fixed order, so on a busy
    machine a pod listed ninth can be tried among the first eight, before the first later proof opens the
    watches, and a break planned for "the batch after it" would land before there is a watch to break.
    """
    lock = threading.Lock()
    done: list[bool] = []

    def maybe() -> None:
        with lock:
            if done or (once_watched and not api.watches_opened):
                return
            done.append(True)
        action()

    api.on_request("POST", r"/pods/web-\d+/eviction$", maybe, times=-1, before=True)


def test_a_pod_someone_else_puts_on_the_room_between_two_batches_is_seen_and_the_drain_holds(
    watched: FakeApiServer,
) -> None:
    api = watched
    cluster_with_room(api, pods=12, cpu="100m")

    def take_the_room() -> None:
        for index in range(3):
            api.add(k8s.pod(f"team-{index}", node=f"n{index}", cpu="900m", owner_name="team"))

    # During the first batch: the proof of the second stands on the watched state.
    on_eviction(api, take_the_room, once_watched=False)
    api.recreate_evicted(0)
    result = run_once(api)
    api.wait_idle()
    assert len(evicted_from(api, "web-")) == 8, "a pod went without room for its replacement"
    # Held: the replacements of the first batch wait for the room the other team took.
    assert result.outcome.held is not None and "nothing is evicted" in result.outcome.held
    assert full_reads(api) == 1, "the proof read the cluster again instead of the watched state"
    assert result.report["watch"]["proofs"] == 1
    assert cordoned(api, "n3")


BREAKS: list[object] = [
    # etcd compacted before the first later proof: the watches cannot start where the run's read ended.
    pytest.param(lambda api: api.compact_watch_history(), False, "410", id="410-gone-after-compaction"),
    # Once a later batch, proven on the watched state, is under way; dropped before that eviction is handled,
    # so that its change cannot reach the client on the old connection and the next proof must see the loss.
    pytest.param(lambda api: api.drop_watches(), True, "lost its connection", id="dropped-connection"),
    # A stream that sends nothing: the evictions of the batch before the next proof never show. Stalled
    # before that eviction is handled, so that its deletion cannot have been sent already.
    pytest.param(lambda api: stall_until_read_again(api), True, "stalled or lags", id="stalled"),
]


def stall_until_read_again(api: FakeApiServer) -> None:
    """Every watch stalls until the run reads the cluster afresh: one stall, which the fresh read's watches
    no longer have (a proof the machine's load makes due before the drain ends finds them sending)."""
    api.stall_watches(True)

    def after_a_list() -> None:
        if full_reads(api) >= 2:
            api.stall_watches(False)

    api.on_request("GET", rf"^{FULL_POD_LIST}$", after_a_list, times=-1)


@pytest.mark.parametrize(("break_it", "once_watched", "reason"), BREAKS)
def test_a_broken_watch_costs_one_fresh_read_and_the_drain_completes(
    watched: FakeApiServer, break_it: Callable[[FakeApiServer], None], once_watched: bool, reason: str
) -> None:
    api = watched
    cluster_with_room(api, pods=20, cpu="100m", used="2")
    api.recreate_evicted(0)
    on_eviction(api, lambda: break_it(api), once_watched=once_watched)
    result = run_once(api)
    api.stall_watches(False)
    assert result.outcome.drain_completed
    assert len(result.outcome.evicted) == 20
    watch = result.report["watch"]
    assert watch["freshReads"] == 1, watch
    assert len(watch["fallbacks"]) == 1 and reason in watch["fallbacks"][0], watch["fallbacks"]
    assert full_reads(api) == 2
    # The other proof stood on the watches started again from the fresh read.
    assert (result.outcome.proofs, watch["proofs"]) == (2, 1)


def test_a_lost_eviction_event_holds_the_proof_until_a_bookmark_gives_it_away_then_it_reads_again(
    watched: FakeApiServer,
) -> None:
    api = watched
    cluster_with_room(api, pods=20, cpu="100m", used="2")
    # Nothing else changes pods: the next pod change once the watches are open is one of the evictions the
    # next proof waits for (the third batch's, or the second's when an eviction of the first was still on
    # its way as its proof opened them), and no watch ever sees it.
    on_eviction(api, lambda: api.lose_watch_events("Pod", 1), once_watched=True)
    result = run_once(api)
    assert result.outcome.drain_completed
    watch = result.report["watch"]
    assert watch["freshReads"] == 1, watch
    # Which shows first depends on when the lost eviction was answered: before the proof read the pods'
    # resourceVersion (then the first event past it gives the loss away), or while the proof waited (then
    # the proof waits for it to its bound). Either way one fresh read; the bookmark case alone is
    # test_a_proof_waits_for_the_eviction_and_a_bookmark_past_it_without_its_event_gives_the_state_up.
    [reason] = watch["fallbacks"]
    assert "the eviction of default/web-" in reason and ("lost an event" in reason or "within 3 s" in reason), reason
    assert full_reads(api) == 2


def watched_state(api: FakeApiServer, stall_seconds: float = 2.0) -> tuple[Cluster, watching.Watched]:
    """The cluster read once and watched from there, as a run's proof state starts it."""
    cluster = Cluster(client.ApiClient(api.client_configuration()))
    snapshot = cluster.read_snapshot()
    state = watching.Watched(
        cluster, snapshot, cluster.list_resource_versions, watching.WatchStats(), stall_seconds=stall_seconds
    )
    state.start()
    return cluster, state


def test_a_silent_watch_is_watched_again_from_where_it_was_and_the_state_still_serves(
    watched: FakeApiServer,
) -> None:
    api = watched
    api.watch_bookmarks(60.0)  # as on a resource nothing changes: kube-apiserver sends no bookmark
    cluster_with_room(api, pods=2, cpu="100m")
    cluster, state = watched_state(api, stall_seconds=0.5)
    try:
        time.sleep(1.6)
        stats = state._stats
        assert stats.reopened >= 3, stats  # each kind at least once
        assert cluster.evict("default", "web-00").status == "evicted"
        state.evicted("default/web-00")
        snapshot = state.current(3.0, {})
        assert [pod.name for pod in snapshot.pods if pod.node_name == "n3"] == ["web-01"]
    finally:
        state.close()


def test_a_proof_waits_for_the_eviction_and_a_bookmark_past_it_without_its_event_gives_the_state_up(
    watched: FakeApiServer,
) -> None:
    api = watched
    cluster_with_room(api, pods=2, cpu="100m")
    cluster, state = watched_state(api)
    try:
        api.lose_watch_events("Pod", 1)
        assert cluster.evict("default", "web-00").status == "evicted"
        state.evicted("default/web-00")
        started = time.monotonic()
        with pytest.raises(watching.UnusableError, match="without showing the eviction of default/web-00"):
            state.current(3.0, {})
        # Held until a bookmark (every 0.2 s) carried a resourceVersion past the eviction's.
        assert 0.1 < time.monotonic() - started < 2.0
    finally:
        state.close()


def test_a_proof_stands_on_the_watched_state_once_it_shows_the_eviction(watched: FakeApiServer) -> None:
    api = watched
    cluster_with_room(api, pods=2, cpu="100m")
    api.watch_bookmarks(60.0)
    cluster, state = watched_state(api)
    try:
        assert cluster.evict("default", "web-00").status == "evicted"
        state.evicted("default/web-00")
        snapshot = state.current(3.0, {})
        assert [pod.name for pod in snapshot.pods if pod.node_name == "n3"] == ["web-01"]
        # The draining node read at a version the watch has not shown yet holds the proof, then it is shown.
        node = api.get("Node", "n3")
        assert node is not None
        node["metadata"].setdefault("labels", {})["seen"] = "yes"
        api.add(node)
        read = cluster.node("n3")
        assert read is not None
        version = int(read["metadata"]["resourceVersion"])
        snapshot = state.current(3.0, {"n3": version})
        assert next(n for n in snapshot.nodes if n.name == "n3").labels.get("seen") == "yes"
    finally:
        state.close()


def test_a_server_that_refuses_the_watch_proves_each_batch_on_a_fresh_read_as_before(api: FakeApiServer) -> None:
    api.serve_watches("forbidden")
    cluster_with_room(api, pods=20, cpu="100m", used="2")
    api.recreate_evicted(0)
    result = run_once(api, env=env_with(CONFIG))
    assert result.outcome.drain_completed
    assert result.outcome.proofs == 2
    assert full_reads(api) == 3
    watch = result.report["watch"]
    assert watch["refused"] is not None and "403" in watch["refused"]
    assert watch["freshReads"] == 2 and watch["fallbacks"] == []
    # Refused once: the other kinds are not asked, and not again.
    assert watches_of(api, "/api/v1/pods") == 1 and watches_of(api, "/api/v1/nodes") == 0
