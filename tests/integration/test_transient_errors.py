"""A 5xx or a broken connection on a write or a read between batches, against the fake API server.

Each write kind meets one transient error, then the API server answers again: the write is made
and the run completes. Meeting it on every attempt, the run ends with a report and the safe outcome
docs/drain-states.md ("Transient errors") gives for that write: the write is skipped with its
reason in `outcome.skipped`, and no eviction follows a cordon, a Lease renewal or a re-read of the
node that did not succeed. The invariants of `conftest.assert_invariants` hold in every test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from compactor import cli
from compactor.actuation import surging
from compactor.core.model import DRAIN_STARTED_AT, PREFER_NO_SCHEDULE, RESERVED_TAINT, SOFT_TAINT, UNDERUTILIZED_SINCE
from compactor.core.timing import format_stamp
from compactor.errors import ClusterAccessError
from compactor.kube.client import Cluster
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import (
    CONFIG,
    MARKED,
    NOW,
    FakeTime,
    cordoned,
    event_reasons,
    light_cluster,
    node_annotations,
    node_taints,
    run_once,
)
from tests.integration.test_reservations import needs_room_kept

ROOT = Path(__file__).resolve().parents[2]
SOFT = {"key": SOFT_TAINT, "value": "true", "effect": PREFER_NO_SCHEDULE}
RESERVED = {"key": RESERVED_TAINT, "value": "true", "effect": PREFER_NO_SCHEDULE}
DRAINING_SINCE = "2026-11-21T11:59:00Z"
TIMED_OUT = "2026-11-21T11:00:00Z"  # past drainTimeoutSeconds (900 s) at NOW


def setup(api: FakeApiServer, kind: str) -> None:
    """The cluster in which the write of `kind` is the one the fault meets first."""
    if kind in ("mark", "node-read"):  # n1 is being drained; n4 is light and unmarked
        light_cluster(api)
        api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: DRAINING_SINCE}))
        api.add(k8s.node("n4"))
    elif kind == "soft-taint":  # n4 is marked and light, but a bare pod keeps it: only its taint is written
        light_cluster(api)
        api.add(k8s.node("n4", annotations={UNDERUTILIZED_SINCE: MARKED}))
        api.add(k8s.pod("debug", node="n4", owner_kind=None))
    elif kind == "reserved-taint":
        needs_room_kept(api)
    elif kind == "rollback":
        light_cluster(api)
        api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: TIMED_OUT}))
        api.add(k8s.pdb("web", match_labels={"app": "web"}, disruptions_allowed=0))
    elif kind == "restamp":  # n5's drain started "in the future": this run writes now
        light_cluster(api)
        api.add(
            k8s.node(
                "n5",
                unschedulable=True,
                annotations={DRAIN_STARTED_AT: "2099-01-01T00:00:00Z", UNDERUTILIZED_SINCE: MARKED},
            )
        )
        api.add(k8s.pod("api-1", node="n5", cpu="100m"))
    else:  # a new drain of n1; n1 carries its soft taint already, so its only PATCH is the cordon
        light_cluster(api)
        api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: MARKED}, taints=[SOFT]))


def evicted(api: FakeApiServer) -> list[str]:
    return sorted(eviction.name for eviction in api.evictions if eviction.status < 300)


# -- one transient error, then the API server answers: the write is made ---------------------------

NODE_PATCH = r"/api/v1/nodes/{}$"


@pytest.mark.parametrize(
    ("kind", "fault"),
    [
        pytest.param("mark", Fault(method="PATCH", path_regex=NODE_PATCH.format("n4"), status=503), id="mark"),
        pytest.param(
            "mark", Fault(method="PATCH", path_regex=NODE_PATCH.format("n4"), drop_connection=True), id="mark-reset"
        ),
        pytest.param(
            "soft-taint", Fault(method="PATCH", path_regex=NODE_PATCH.format("n4"), status=500), id="soft-taint"
        ),
        pytest.param(
            "reserved-taint", Fault(method="PATCH", path_regex=NODE_PATCH.format("n2"), status=502), id="reserved-taint"
        ),
        pytest.param("drain", Fault(method="PATCH", path_regex=NODE_PATCH.format("n1"), status=504), id="cordon"),
        pytest.param(
            "drain",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n1"), status=500, applied=True),
            id="cordon-that-landed",
        ),
        pytest.param("rollback", Fault(method="PATCH", path_regex=NODE_PATCH.format("n1"), status=503), id="rollback"),
        pytest.param("restamp", Fault(method="PATCH", path_regex=NODE_PATCH.format("n5"), status=503), id="restamp"),
        pytest.param(
            "drain", Fault(method="PATCH", path_regex=r"/namespaces/default/pods/", status=503), id="deletion-cost"
        ),
        pytest.param("drain", Fault(method="POST", path_regex=r"/events$", status=503), id="event"),
        pytest.param(
            "drain", Fault(method="PUT", path_regex=r"/leases/node-compactor$", status=500), id="lease-renewal"
        ),
        pytest.param("drain", Fault(method="POST", path_regex=r"/leases$", status=503), id="lease-creation"),
        pytest.param("node-read", Fault(method="GET", path_regex=NODE_PATCH.format("n1"), status=503), id="node-read"),
    ],
)
def test_one_transient_error_on_a_write_is_retried_and_the_run_completes(
    api: FakeApiServer, kind: str, fault: Fault
) -> None:
    setup(api, kind)
    api.add_fault(fault)
    time = FakeTime()
    result = run_once(api, time=time)  # no exception: exit 0
    outcome = result.outcome
    assert outcome.errors == [] and outcome.skipped == [], (outcome.errors, outcome.skipped)
    met = [r for r in api.requests if r.status is None or r.status >= 500]
    assert len(met) == 1, "the fault was not met"
    assert time.now - 1000 <= 60, "the retries stayed inside the run's budget"
    if kind == "mark":
        assert UNDERUTILIZED_SINCE in node_annotations(api, "n4") and "n4" in outcome.marks_added
    elif kind == "soft-taint":
        assert SOFT in node_taints(api, "n4") and "n4" in outcome.soft_taints_added
    elif kind == "reserved-taint":
        assert outcome.reservations_added == ["n2"] and outcome.drain_started
    elif kind == "rollback":
        assert outcome.rolled_back and not cordoned(api, "n1")
    elif kind == "restamp":
        assert outcome.restamped == ["n5"]
        assert node_annotations(api, "n5")[DRAIN_STARTED_AT] == "2026-11-21T12:00:00Z"
    elif kind == "node-read":
        assert evicted(api) == ["web-a1", "web-a2"] and outcome.drain_completed
    else:
        assert outcome.drain_started and evicted(api) == ["web-a1", "web-a2"]
        assert outcome.drain_completed
    if fault.path_regex == r"/namespaces/default/pods/":
        assert len(outcome.deletion_costs_added) == 3  # web-a1, web-a2 and busy-b2
    if fault.path_regex == r"/events$":
        assert "NodeCompactorDrainStarted" in event_reasons(api, "n1")


def test_a_5xx_on_a_read_before_a_later_batch_is_retried_and_the_drain_goes_on(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: MARKED}))
    api.add(k8s.node("n2"))
    for index in range(12):
        api.add(k8s.pod(f"web-{index:02d}", node="n1", cpu="100m"))
    # The cluster read before the second batch meets the fault.
    api.on_request(
        "POST", r"/eviction$", lambda: api.add_fault(Fault(method="GET", path_regex=r"/api/v1/pods$", status=503))
    )
    result = run_once(api)
    assert result.outcome.errors == [] and result.outcome.skipped == []
    assert len(evicted(api)) == 12 and result.outcome.proofs >= 1
    assert [r.status for r in api.requests if r.status == 503] == [503]


def test_an_eviction_answered_5xx_after_it_landed_is_not_sent_again_to_the_recreated_pod(
    api: FakeApiServer,
) -> None:
    """A StatefulSet pod comes back under the same name on another node: evicting it again would move it twice."""
    light_cluster(api)
    api.add(k8s.pod("db-0", node="n1", cpu="100m", owner_kind="StatefulSet", owner_name="db"))
    api.recreate_evicted(0)
    api.add_fault(Fault(method="POST", path_regex=r"/pods/db-0/eviction$", status=500, applied=True))
    api.on_request("POST", r"/pods/db-0/eviction$", api.wait_idle)  # the replacement is bound before the answer
    result = run_once(api)
    replacement = api.get("Pod", "db-0")
    assert replacement is not None and replacement["spec"]["nodeName"] != "n1"
    assert [e.name for e in api.evictions].count("db-0") == 1, api.evictions
    assert "default/db-0" in result.outcome.gone and result.outcome.errors == []


# -- the API server keeps failing: the documented safe outcome, a report, exit 0 -------------------


@pytest.mark.parametrize(
    ("kind", "fault", "skipped"),
    [
        pytest.param(
            "mark",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n4"), status=503, times=-1),
            "mark on n4",
            id="mark",
        ),
        pytest.param(
            "soft-taint",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n4"), status=500, times=-1),
            "taint on n4",
            id="soft-taint",
        ),
        pytest.param(
            "reserved-taint",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n2"), status=503, times=-1),
            f"{RESERVED_TAINT} taint on n2",
            id="reserved-taint",
        ),
        pytest.param(
            "drain",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n1"), status=503, times=-1),
            "cordon n1",
            id="cordon",
        ),
        pytest.param(
            "rollback",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n1"), status=503, times=-1),
            "roll back n1",
            id="rollback",
        ),
        pytest.param(
            "restamp",
            Fault(method="PATCH", path_regex=NODE_PATCH.format("n5"), status=503, times=-1),
            f"{DRAIN_STARTED_AT} on n5",
            id="restamp",
        ),
        pytest.param(
            "drain",
            Fault(method="PATCH", path_regex=r"/namespaces/default/pods/", status=503, times=-1),
            "pod-deletion-cost",
            id="deletion-cost",
        ),
        pytest.param("drain", Fault(method="POST", path_regex=r"/events$", status=503, times=-1), None, id="event"),
        pytest.param(
            "drain",
            Fault(method="PUT", path_regex=r"/leases/node-compactor$", status=503, times=-1),
            "cordon n1",
            id="lease-renewal",
        ),
        pytest.param(
            "node-read",
            Fault(method="GET", path_regex=NODE_PATCH.format("n1"), status=503, times=-1),
            "evict pods on n1",
            id="node-read",
        ),
    ],
)
def test_a_persistent_transient_error_skips_that_write_safely_and_the_run_ends_with_a_report(
    api: FakeApiServer, kind: str, fault: Fault, skipped: str | None
) -> None:
    setup(api, kind)
    api.add_fault(fault)
    time = FakeTime()
    result = run_once(api, time=time)  # no exception: exit 0
    outcome = result.outcome
    assert result.report["outcome"]["skipped"] == outcome.skipped
    assert outcome.errors == []
    if skipped is None:
        assert outcome.skipped == []
    else:
        assert any(skipped in reason for reason in outcome.skipped), outcome.skipped
    assert time.now - 1000 <= 60, "the retries stayed inside the run's budget"
    if kind == "mark":  # the mark waits for the next run; the drain of the same run goes on
        assert UNDERUTILIZED_SINCE not in node_annotations(api, "n4")
        assert outcome.drain_completed
    elif kind == "soft-taint":
        assert SOFT not in node_taints(api, "n4")
    elif kind == "reserved-taint":  # no room kept: the drain does not start
        assert not outcome.drain_started and not cordoned(api, "n1") and api.evictions == []
        assert "could not reserve room on n2" in (outcome.stale or "")
    elif kind == "rollback":  # still cordoned with drain-started-at: the next run rolls it back again
        assert not outcome.rolled_back and cordoned(api, "n1")
        assert DRAIN_STARTED_AT in node_annotations(api, "n1")
        assert any("the next run rolls it back" in reason for reason in outcome.skipped), outcome.skipped
    elif kind == "restamp":
        assert node_annotations(api, "n5")[DRAIN_STARTED_AT] == "2099-01-01T00:00:00Z"
    elif kind == "node-read":  # the node could not be seen still ours: nothing is evicted
        assert api.evictions == [] and cordoned(api, "n1") and not outcome.drain_completed
        assert outcome.interrupted is not None
    elif fault.path_regex in (NODE_PATCH.format("n1"), r"/leases/node-compactor$"):
        # no cordon made, or the Lease not proven: no eviction may follow
        assert not outcome.drain_started and not cordoned(api, "n1") and api.evictions == []
    else:  # pod-deletion-costs and Events only steer or inform: the drain goes on
        assert outcome.drain_started and outcome.drain_completed


def test_a_5xx_on_every_read_before_a_later_batch_stops_the_evictions_at_that_batch(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: MARKED}))
    api.add(k8s.node("n2"))
    for index in range(12):
        api.add(k8s.pod(f"web-{index:02d}", node="n1", cpu="100m"))
    api.on_request(
        "POST",
        r"/eviction$",
        lambda: api.add_fault(Fault(method="GET", path_regex=r"/api/v1/pods$", status=503, times=-1)),
    )
    result = run_once(api)
    outcome = result.outcome
    assert outcome.errors == []
    assert len(evicted(api)) == 8, "evictions went on past the batch whose proof could not be read"
    assert len(outcome.waiting) == 4 and not outcome.drain_completed
    assert any("re-read the cluster" in reason for reason in outcome.skipped), outcome.skipped
    assert cordoned(api, "n1"), "the drain stays readable for the next run"


def test_a_lease_that_cannot_be_created_is_a_failed_run_that_wrote_nothing(api: FakeApiServer) -> None:
    setup(api, "drain")
    api.add_fault(Fault(method="POST", path_regex=r"/leases$", status=503, times=-1))
    api.reset_counters()
    with pytest.raises(ClusterAccessError, match="create Lease"):
        run_once(api)
    assert api.writes == []


def test_the_command_line_exits_0_with_a_report_after_a_persistent_5xx_on_a_mark(
    api: FakeApiServer, tmp_path: Path
) -> None:
    # The command reads the real clock: the drain started a minute before it.
    light_cluster(api)
    started = format_stamp(datetime.now(UTC) - timedelta(seconds=60))
    api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: started}))
    api.add(k8s.node("n4"))
    api.add_fault(Fault(method="PATCH", path_regex=NODE_PATCH.format("n4"), status=503, times=-1))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "COMPACTOR_CONFIG": json.dumps(CONFIG), "COMPACTOR_RUN_BUDGET_SECONDS": "60"}
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_FIRESTORE_DOCUMENT", "KUBERNETES_SERVICE_HOST", "KUBECONFIG"):
        env.pop(variable, None)
    done = subprocess.run(
        [sys.executable, "-m", "compactor", "run", "--kubeconfig", str(kubeconfig), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["outcome"]["drainCompleted"]
    assert any(reason.startswith("mark on n4:") for reason in report["outcome"]["skipped"])


# -- rolling restarts (surgeSingleReplicas) ----------------------------------------------------------


@pytest.fixture
def cluster(api: FakeApiServer) -> Iterator[Cluster]:
    with client.ApiClient(api.client_configuration()) as api_client:
        found = Cluster(api_client)
        found.sleep = FakeTime().sleep
        yield found


def restart_web(api: FakeApiServer, cluster: Cluster) -> tuple[surging.Restarts, str]:
    api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: DRAINING_SINCE}))
    api.add(k8s.node("n2"))
    for obj in k8s.deployment("web", nodes=["n1"]):
        api.add(obj)
    node = api.get("Node", "n1")
    assert node is not None
    (pod,) = [
        f"default/{p['metadata']['name']}" for p in api.objects("Pod") if p["metadata"]["name"].startswith("web-")
    ]
    done = surging.start(cluster, node, [(pod, "default/web")], clock=lambda: NOW, may_act=lambda _what: True)
    surging.wait(cluster, done, time_left=lambda: 30.0, sleep=time.sleep, poll_seconds=0.02)
    return done, pod


def test_one_5xx_on_a_rolling_restart_is_retried_and_the_pod_moves(api: FakeApiServer, cluster: Cluster) -> None:
    api.add_fault(Fault(method="PATCH", path_regex=r"/deployments/web$", status=503))
    done, pod = restart_web(api, cluster)
    assert done.errors == [] and done.written == {"default/web": "2026-11-21T12:00:00Z"}
    assert done.moved == [pod]


def test_a_persistent_5xx_on_a_rolling_restart_leaves_the_pod_waiting_with_the_reason(
    api: FakeApiServer, cluster: Cluster
) -> None:
    api.add_fault(Fault(method="PATCH", path_regex=r"/deployments/web$", status=503, times=-1))
    done, pod = restart_web(api, cluster)
    assert done.errors == [] and done.written == {} and done.moved == []
    assert "503" in done.waiting[pod] and any("Deployment default/web" in reason for reason in done.skipped)


# -- cleanup ---------------------------------------------------------------------------------------


def cleanup_json(capsys: pytest.CaptureFixture[str], kubeconfig: str) -> tuple[int, dict[str, Any]]:
    code = cli.main(["cleanup", "--kubeconfig", kubeconfig, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def traces(api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_LEASE_NAMESPACE", "KUBECONFIG"):
        monkeypatch.delenv(variable, raising=False)
    api.add(k8s.node("draining", annotations={DRAIN_STARTED_AT: MARKED}, unschedulable=True))
    return str(api.write_kubeconfig(tmp_path / "kubeconfig"))


def test_cleanup_retries_one_5xx_on_a_write_and_completes(
    api: FakeApiServer, traces: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add_fault(Fault(method="PATCH", path_regex=NODE_PATCH.format("draining"), status=503))
    code, report = cleanup_json(capsys, traces)
    assert code == 0 and report["failed"] == []
    assert not cordoned(api, "draining") and DRAIN_STARTED_AT not in node_annotations(api, "draining")


def test_cleanup_reports_a_write_that_keeps_failing_and_exits_1(
    api: FakeApiServer, traces: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add_fault(Fault(method="PATCH", path_regex=NODE_PATCH.format("draining"), status=503, times=-1))
    code, report = cleanup_json(capsys, traces)
    assert code == 1
    (failed,) = report["failed"]
    assert failed["name"] == "draining" and "503" in failed["why"]
    assert cordoned(api, "draining"), "left as it was, for the next cleanup"
    assert api.objects("Lease") == [], "the Leases are still deleted last"
