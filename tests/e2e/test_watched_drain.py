"""A drain whose later batches stand on watches (issue 35), on the real control plane, and a watch broken on purpose.

node-compactor lists the cluster once per run; when a drain needs a later batch it watches nodes,
pods and PodDisruptionBudgets from that list's resourceVersions and proves each batch on the watched
state once it shows the run's evictions (docs/drain-states.md "How fresh a proof's state is"), with the
`watch` verb deploy/rbac.yaml grants node-compactor's identity. The second test
restarts kube-apiserver in the middle of a drain held back by a PodDisruptionBudget: the watches lose
their connection, the run falls back to a fresh read (or stops evicting for this run), and the runs
after it finish the drain with no pod left Pending and the PDB never below its minimum.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from typing import Any

import pytest

from tests.e2e import controlplane
from tests.e2e.cluster import (
    REPOSITORY,
    ApiError,
    KubeCluster,
    Scenario,
    Watcher,
    compactor_env,
    is_ready,
    name_of,
    node_of,
    wait_for,
)
from tests.e2e.test_drain import MARKED_SECONDS, BudgetWatch, config_for, movable_pods_on

pytestmark = pytest.mark.e2e


def light_node_with_room_elsewhere(scenario: Scenario, pool: str, pods: int) -> str:
    """`pool`'s light node (`pods` web pods of 100m, all there) and two busy nodes with room for them."""
    light = f"{pool}-l-1"
    scenario.add_node(light, pool=pool)
    web = scenario.deployment("web", replicas=pods, cpu="100m", pool=pool, prefer_node=light)
    assert {node_of(pod) for pod in web} == {light}
    busy = [scenario.add_node(f"{pool}-b-{index}", pool=pool, cpu="8")["metadata"]["name"] for index in (1, 2)]
    scenario.deployment("batch", replicas=2, cpu="6500m", pool=pool, spread=True)
    assert {node_of(pod) for pod in scenario.pods("batch")} == set(busy)
    return light


def full_pod_reads(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first page of each list of every unfinished pod: one per full read of the cluster."""
    return [
        e
        for e in events
        if e["verb"] == "list"
        and (e.get("objectRef") or {}).get("resource") == "pods"
        and "status.phase" in e["requestURI"]
        and "continue=" not in e["requestURI"]
    ]


def test_a_drain_of_twenty_pods_reads_the_cluster_once_and_proves_its_later_batches_on_watches(
    scenario: Scenario,
) -> None:
    cluster = scenario.cluster
    pool = "watched-pool"
    light = light_node_with_room_elsewhere(scenario, pool, 20)
    config = config_for(pool)
    assert cluster.compactor("run", config=config).exit_code == 0  # marks
    time.sleep(MARKED_SECONDS + 1)

    mark = cluster.audit_mark()
    run = cluster.compactor("run", config=config, env={"COMPACTOR_RUN_BUDGET_SECONDS": "60"})
    assert run.exit_code == 0, run
    assert (run.report["decision"]["action"], run.report["decision"]["node"]) == ("drain", light), run
    outcome = run.report["outcome"]
    assert len(outcome["evicted"]) == 20, outcome
    # 20 pods, 8 a batch: two later proofs, both on the watched state.
    watch = run.report["watch"]
    assert outcome["proofs"] == 2 and watch["proofs"] == 2, watch
    assert watch["freshReads"] == 0 and watch["fallbacks"] == [], watch
    events = cluster.audit_events(mark)
    assert len(full_pod_reads(events)) == 1, [e["requestURI"] for e in full_pod_reads(events)]
    watched = {(e.get("objectRef") or {}).get("resource") for e in events if e["verb"] == "watch"}
    assert watched == {"nodes", "pods", "poddisruptionbudgets"}, watched
    wait_for("the replacements run", lambda: len([p for p in scenario.pods("web") if is_ready(p)]) == 20)
    assert light not in {node_of(pod) for pod in scenario.pods("web")}


def restart_apiserver(cluster: KubeCluster) -> None:
    """Stop kube-apiserver and start it again with the same command line, as a control plane upgrade does."""
    plane = cluster.plane
    [process] = [p for p in plane.processes if p.name == "kube-apiserver"]
    argv = [str(arg) for arg in process.popen.args]  # type: ignore[union-attr]
    process.stop()
    plane.processes.remove(process)
    plane.start_process("kube-apiserver", argv)
    controlplane.wait_until(
        "kube-apiserver is ready again", plane._apiserver_ready, timeout=90, process=plane.processes[-1]
    )


def test_a_kube_apiserver_restart_mid_drain_breaks_the_watches_and_the_drain_still_ends_with_no_stranded_pod(
    scenario: Scenario,
) -> None:
    cluster = scenario.cluster
    pool = "restart-pool"
    light = light_node_with_room_elsewhere(scenario, pool, 12)
    # One disruption at a time: each eviction waits for the last replacement to be Ready, so the run
    # lasts long enough to watch, and the drain spans the restart.
    scenario.pdb("web", "web", max_unavailable=1)
    config = config_for(pool)
    assert cluster.compactor("run", config=config).exit_code == 0  # marks
    time.sleep(MARKED_SECONDS + 1)

    mark = cluster.audit_mark()
    budget = BudgetWatch(cluster, scenario.namespace, {"web": 11})

    def observe() -> None:
        with contextlib.suppress(ApiError, OSError):  # while kube-apiserver restarts, nothing can be read
            budget.observe()

    argv = cluster.compactor_argv("run", config=config)
    with Watcher(observe):
        running = subprocess.Popen(
            argv,
            cwd=REPOSITORY,
            env=compactor_env({"COMPACTOR_RUN_BUDGET_SECONDS": "60"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(
                "node-compactor watches the pods",
                lambda: any(
                    e["verb"] == "watch" and (e.get("objectRef") or {}).get("resource") == "pods"
                    for e in cluster.audit_events(mark)
                ),
                timeout=60,
                interval=0.5,
            )
            restart_apiserver(cluster)
            stdout, stderr = running.communicate(timeout=120)
        finally:
            if running.poll() is None:
                running.kill()
        assert running.returncode == 0, stderr[-3000:]
        first = json.loads(stdout)
        assert (first["decision"]["action"], first["decision"]["node"]) == ("drain", light), first
        watch = first.get("watch") or {}
        outcome = first["outcome"]
        # The restart broke the watches: the run read the cluster afresh, or stopped evicting for now.
        assert watch.get("watches", 0) >= 1 and watch.get("proofs", 0) >= 1, watch  # it was watching
        broken = watch.get("fallbacks") or []
        assert broken or outcome["interrupted"] or outcome["skipped"], (watch, outcome)
        (cluster.workdir / "runs").mkdir(exist_ok=True)
        (cluster.workdir / "runs" / "restart-first-run.log").write_text(f"{stdout}\n{stderr}")
        # The next runs go on with the drain (each reads, and watches, anew). A run that ended while
        # kube-apiserver was down could not give its Lease back: the next one waits for it to expire.
        deadline = time.monotonic() + 240
        later: list[dict[str, Any]] = []
        while movable_pods_on(cluster, light) and time.monotonic() < deadline:
            run = cluster.compactor("run", config=config, env={"COMPACTOR_RUN_BUDGET_SECONDS": "60"})
            if run.exit_code != 0 and "holds Lease" in run.stderr:
                time.sleep(5)
                continue
            assert run.exit_code == 0, run
            later.append(run.report)
        web = cluster.wait_deployment(scenario.namespace, "web", 12, timeout=90)
    assert movable_pods_on(cluster, light) == []
    assert light not in {node_of(pod) for pod in web}
    pending = [name_of(p) for p in scenario.pods() if p["status"].get("phase") != "Running"]
    assert pending == [], f"stranded pods: {pending}"
    assert budget.violations == [], budget.violations
    assert cluster.node(light)["spec"].get("unschedulable") is True
    # After the restart, a run that proved a later batch again did it on new watches or on a fresh read, each
    # counted (how many later batches there are depends on how fast the replacements turn Ready).
    for report in later:
        watch, proofs = report.get("watch") or {}, report["outcome"]["proofs"]
        assert watch.get("proofs", 0) + watch.get("freshReads", 0) >= proofs or watch.get("refused"), report
