"""Room reserved for a drain's last pods, written over real HTTP against the fake API server.

n1 is marked and holds a 1-cpu pod and four of 300m. n2 has 1000m free, n3 and n4 600m each: the
pods fit only if the big one gets n2, which the scheduler's least-allocated scoring would fill with
the small ones first (the big pod has the higher priority, so it is evicted after them). The
planner keeps n2's room with the reserved PreferNoSchedule taint, which must be on n2 before the
first eviction.
"""

from __future__ import annotations

from compactor.core.model import DRAIN_STARTED_AT, PREFER_NO_SCHEDULE, RESERVED_TAINT, UNDERUTILIZED_SINCE
from tests.fakeapi import builders as k8s
from tests.fakeapi.server import FakeApiServer, Fault
from tests.integration.conftest import MARKED, node_annotations, node_taints, run_once

RESERVED = {"key": RESERVED_TAINT, "value": "true", "effect": PREFER_NO_SCHEDULE}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def needs_room_kept(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: MARKED}))
    api.add(k8s.node("n2", taints=[GPU]))
    api.add(k8s.node("n3"))
    api.add(k8s.node("n4"))
    api.add(
        k8s.pod("z-big", node="n1", cpu="1", memory="0", priority=1000, tolerations=[k8s.toleration("nvidia.com/gpu")])
    )
    for index in range(4):
        api.add(
            k8s.pod(
                f"a-small-{index}", node="n1", cpu="300m", memory="0", tolerations=[k8s.toleration("nvidia.com/gpu")]
            )
        )
    api.add(k8s.pod("busy-n2", node="n2", cpu="3", memory="0", owner_kind=None))
    for name in ("n3", "n4"):
        api.add(k8s.pod(f"busy-{name}", node=name, cpu="3400m", memory="0", owner_kind=None))


def test_the_reserved_taint_is_on_the_kept_node_before_the_first_eviction(api: FakeApiServer) -> None:
    needs_room_kept(api)
    result = run_once(api)
    decision = result.report["decision"]
    assert (decision["action"], decision["node"]) == ("drain", "n1")
    assert result.report["reservations"] == {"add": ["n2"], "remove": []}
    assert result.outcome.reservations_added == ["n2"]
    # n2's own taints are sent back as read, ours after them.
    assert node_taints(api, "n2") == [GPU, RESERVED]
    writes = api.writes
    reserved_at = next(i for i, w in enumerate(writes) if w.kind == "Node" and w.name == "n2")
    cordoned_at = next(
        i
        for i, w in enumerate(writes)
        if w.kind == "Node"
        and w.name == "n1"
        and w.method == "PATCH"
        and ((w.body or {}).get("spec") or {}).get("unschedulable")
    )
    first_eviction = min(i for i, w in enumerate(writes) if w.path.endswith("/eviction"))
    assert reserved_at < cordoned_at < first_eviction


def test_a_reservation_that_cannot_be_written_stops_the_drain_before_the_cordon(api: FakeApiServer) -> None:
    needs_room_kept(api)
    # A node that keeps changing: each write is read again and tried again, then given up.
    api.add_fault(Fault(method="PATCH", path_regex=r"/nodes/n2$", status=409, times=-1))
    result = run_once(api)
    assert not result.outcome.drain_started
    assert "could not reserve room on n2" in (result.outcome.stale or "")
    assert DRAIN_STARTED_AT not in node_annotations(api, "n1")
    assert not api.evictions
    assert RESERVED not in node_taints(api, "n2")


def test_once_no_drain_is_evicting_the_reservation_comes_off_and_other_taints_stay(api: FakeApiServer) -> None:
    api.add(k8s.node("n1"))
    api.add(k8s.node("n2", taints=[GPU, RESERVED]))
    api.add(k8s.pod("busy-n1", node="n1", cpu="3900m"))
    api.add(k8s.pod("busy-n2", node="n2", cpu="3900m", tolerations=[k8s.toleration("nvidia.com/gpu")]))
    result = run_once(api)
    assert result.report["reservations"] == {"add": [], "remove": ["n2"]}
    assert result.outcome.reservations_removed == ["n2"]
    assert node_taints(api, "n2") == [GPU]


def test_a_reservation_stays_while_the_drain_it_was_made_for_is_evicting(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: "2026-11-21T11:58:00Z"}))
    api.add(k8s.node("n2", taints=[RESERVED]))
    api.add(k8s.pod("web", node="n1", cpu="300m"))
    api.add(k8s.pdb("web", match_labels={"app": "web"}, disruptions_allowed=0))
    api.add(k8s.pod("busy-n2", node="n2", cpu="3"))
    result = run_once(api)
    assert result.report["decision"]["action"] == "continue-drain"
    assert result.report["reservations"]["remove"] == []
    assert node_taints(api, "n2") == [RESERVED]
