"""A run killed after each of its write steps leaves a state the next run finishes correctly.

The first run is a real `python -m compactor run` process; a slow API call
holds it at the chosen step, and it is killed there with SIGKILL. The next run
(in this process, once the dead run's Lease has expired) must resume the
drain or roll it back, and the invariants (one drain at most, no pod deleted)
must hold throughout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from compactor.core.model import DRAIN_FAILED_AT, DRAIN_STARTED_AT, UNDERUTILIZED_SINCE
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import CONFIG, cordoned, light_cluster, node_annotations, run_once

ROOT = Path(__file__).resolve().parents[2]


def start_run(api: FakeApiServer, tmp_path: Path) -> subprocess.Popen[bytes]:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "COMPACTOR_CONFIG": json.dumps(CONFIG), "COMPACTOR_RUN_BUDGET_SECONDS": "60"}
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_FIRESTORE_DOCUMENT", "KUBERNETES_SERVICE_HOST"):
        env.pop(variable, None)
    return subprocess.Popen(
        [sys.executable, "-m", "compactor", "run", "--kubeconfig", str(kubeconfig), "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill_when(process: subprocess.Popen[bytes], happened: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    try:
        while not happened():
            assert process.poll() is None, "the run ended before reaching the step to crash at"
            assert time.monotonic() < deadline, "the run never reached the step to crash at"
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def after_the_dead_runs_lease() -> datetime:
    # The killed run took the Lease at the real current time for budget + 30 s.
    return datetime.now(UTC) + timedelta(seconds=120)


def cordon_sent(api: FakeApiServer, node: str) -> bool:
    """The cordon's patch reached the server (not the soft taint's, which also writes spec)."""
    return any(
        w.name == node and "unschedulable" in ((w.body or {}).get("spec") or {}) for w in api.writes_of("Node", "PATCH")
    )


def test_killed_after_writing_marks_the_next_run_drains(api: FakeApiServer, tmp_path: Path) -> None:
    light_cluster(api)
    api.add(k8s.node("n4"))  # light and unmarked: the run marks it first
    api.add_fault(Fault(method="GET", path_regex=r"/api/v1/nodes/n1$", delay=20, times=-1))
    kill_when(start_run(api, tmp_path), lambda: UNDERUTILIZED_SINCE in node_annotations(api, "n4"))
    assert not cordoned(api, "n1")
    api.clear_faults()
    result = run_once(api, at=after_the_dead_runs_lease())
    assert result.report["decision"]["action"] == "drain"
    assert result.outcome.drain_completed


def test_killed_after_the_cordon_the_next_run_continues_the_drain(api: FakeApiServer, tmp_path: Path) -> None:
    light_cluster(api)
    api.add_fault(Fault(method="POST", path_regex=r"/eviction$", delay=20, times=-1))
    kill_when(start_run(api, tmp_path), lambda: cordon_sent(api, "n1"))
    assert cordoned(api, "n1") and DRAIN_STARTED_AT in node_annotations(api, "n1")
    api.clear_faults()
    time.sleep(0.5)  # let the fake finish requests the dead run left behind
    result = run_once(api, at=after_the_dead_runs_lease())
    assert result.report["decision"]["action"] in ("continue-drain", "none")
    assert api.get("Pod", "web-a1") is None and api.get("Pod", "web-a2") is None
    assert cordoned(api, "n1")


def test_killed_between_evictions_the_next_run_evicts_the_rest(api: FakeApiServer, tmp_path: Path) -> None:
    light_cluster(api)
    api.add_fault(Fault(method="POST", path_regex=r"/pods/web-a2/eviction$", delay=20, times=-1))
    kill_when(start_run(api, tmp_path), lambda: any(e.name == "web-a1" for e in api.evictions))
    api.clear_faults()
    time.sleep(0.5)
    result = run_once(api, at=after_the_dead_runs_lease())
    assert result.report["decision"]["action"] in ("continue-drain", "none")
    assert api.get("Pod", "web-a2") is None
    assert cordoned(api, "n1")


def test_killed_during_a_rollback_the_next_run_finishes_it(api: FakeApiServer, tmp_path: Path) -> None:
    light_cluster(api)
    started = (datetime.now(UTC) - timedelta(seconds=2000)).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: started}))
    api.add_fault(Fault(method="PATCH", path_regex=r"/api/v1/nodes/n1$", delay=20, times=-1))
    kill_when(
        start_run(api, tmp_path),
        lambda: any(r.method == "PATCH" and r.path.endswith("/nodes/n1") for r in api.requests),
    )
    api.clear_faults()
    time.sleep(0.5)
    result = run_once(api, at=after_the_dead_runs_lease())
    # Either the dead run's patch landed (the node is already given back) or this run gives it back.
    assert result.report["decision"]["action"] in ("rollback", "none")
    assert not cordoned(api, "n1")
    assert DRAIN_STARTED_AT not in node_annotations(api, "n1")
    assert DRAIN_FAILED_AT in node_annotations(api, "n1")


@pytest.mark.parametrize("step", ["marks", "cordon"])
def test_an_exception_after_a_write_step_leaves_a_readable_state(api: FakeApiServer, step: str) -> None:
    light_cluster(api)
    api.add(k8s.node("n4"))
    if step == "marks":
        api.add_fault(Fault(method="GET", path_regex=r"/api/v1/nodes/n1$", status=500, times=-1))
    else:
        api.add_fault(Fault(method="POST", path_regex=r"/eviction$", status=403, times=-1))
    with contextlib.suppress(Exception):  # the failure is not under test here, what it leaves behind is
        run_once(api)
    api.clear_faults()
    result = run_once(api, at=datetime(2026, 11, 21, 12, 2, tzinfo=UTC))
    assert result.report["decision"]["action"] in ("drain", "continue-drain")
    assert result.outcome.drain_completed
