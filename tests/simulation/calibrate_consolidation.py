"""Calibration: node-compactor's consolidation, node count run by run, on the real control plane and in the simulator.

`python -m tests.simulation.calibrate_consolidation [--repeat N] [--seeds N] [--runs N]` starts the e2e
control plane (tests/e2e/controlplane.py: real kube-apiserver, kube-controller-manager, kube-scheduler
and kwok nodes; build it with tests/e2e/toolchain/build.sh) and, `--repeat` times on fresh nodes:

1. lays out a fragmented pool (POOL: NODES_PER_ZONE e2-standard-4-sized kwok nodes in each of
   ZONES, a DaemonSet, the Deployments of WORKLOADS with their PodDisruptionBudgets; one of them
   spread over zones with DoNotSchedule), where every node is below node-compactor's 0.75 cpu limit;
2. takes a kubectl-style snapshot (nodes, pods, PDBs) once it has settled;
3. runs node-compactor `--runs` times one after another as users run it
   (`python -m compactor run --kubeconfig ... --config ... --json`, CONFIG: every wait 0);
4. after each run applies the STAND-IN for the Cluster Autoscaler and waits until the cluster has
   settled (every replacement pod Ready or Unschedulable), then records the node count, the node
   that started draining, the pods left Pending and the pods per node.

The simulator starts from each snapshot (compactor.simulation.kubectl, the path of
`simulate --snapshot`), over seeds 1..`--seeds` (its scheduler breaks ties at random), and makes the
same runs: its NodeCompactor strategy (the real planner and executor over port.py) every
RUN_INTERVAL of simulated time, the same STAND-IN after each, and no Cluster Autoscaler at all, on
either side: neither scales up, and nothing else removes nodes. Runs are compared by their index,
never by wall time.

STAND-IN, the same on both sides: after a run, every node carrying node-compactor's
`drain-started-at` whose only pods left are DaemonSet pods (or finished ones) is deleted (the real
side deletes the Node object; kube-controller-manager's pod garbage collector removes its
DaemonSet pod). That is what the Cluster Autoscaler does with an empty node, minus its
`scale-down-unneeded-time`; its own scale-down decisions stay uncalibrated.

`--shape below-50` lays out the variant whose second nodes sit at 48%; `--balanced-allocation-1-35`
scores BalancedAllocation in the simulator as kube-scheduler 1.35 and earlier did, as the model did
before this calibration (`balanced_allocation_1_35`);
`--simulate-only DIR` runs the simulator again against the real runs a `--keep DIR` kept.

It must never run in the default test session (it starts a control plane and takes minutes): it is
a module, not a test, and writes nothing outside a temporary directory unless `--keep DIR` names one.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from compactor.core import fit
from compactor.core.cluster import NodeState
from compactor.core.model import DRAIN_STARTED_AT, Pod
from compactor.core.prices import machines
from compactor.settings import config as config_module
from compactor.simulation import kubectl, runner, scheduler
from compactor.simulation.strategies import RUN_INTERVAL, NodeCompactor
from tests.e2e import controlplane
from tests.e2e.cluster import (
    PAUSE_IMAGE,
    POOL_LABEL,
    ZONE_LABEL,
    KubeCluster,
    Scenario,
    is_ready,
    name_of,
    node_of,
    wait_for,
)
from tests.e2e.conftest import grant_compactor_rbac

POOL = "default-pool"
MACHINE = "e2-standard-4"
ZONES = ("europe-west1-b", "europe-west1-c", "europe-west1-d")
# The pool grows in two phases, as a pool does over a day, so that its nodes differ: first
# NODES_PER_ZONE nodes per zone and the "first" Deployments, then as many nodes again and the
# "second" ones (kube-scheduler's least-allocated scoring puts them on the new nodes first).
NODES_PER_ZONE = 2
DAEMON_CPU = "100m"
# phase, name, cpu, memory, replicas, zone spread (DoNotSchedule, maxSkew 1), PDB; created in this order.
# "above-50": the first nodes at 71% of cpu, the second at 51%, every one between the Cluster
# Autoscaler's 50% and node-compactor's 75%. "below-50": web 500m and api 800m, the second nodes at 48%
# (the shape in which the simulator's BalancedAllocation departed from kube-scheduler 1.36).
SHAPES: dict[str, tuple[tuple[str, str, str, str, int, bool, dict[str, Any]], ...]] = {
    "above-50": (
        ("first", "web", "450m", "512Mi", 24, False, {"maxUnavailable": 1}),
        ("second", "api", "900m", "1Gi", 12, False, {"minAvailable": 10}),
        ("second", "cache", "500m", "1Gi", 12, True, {"maxUnavailable": 1}),
    ),
    "below-50": (
        ("first", "web", "500m", "512Mi", 24, False, {"maxUnavailable": 1}),
        ("second", "api", "800m", "1Gi", 12, False, {"minAvailable": 10}),
        ("second", "cache", "500m", "1Gi", 12, True, {"maxUnavailable": 1}),
    ),
}
WORKLOADS = SHAPES["above-50"]  # `--shape` replaces it
APPS = tuple(workload[1] for workload in WORKLOADS)
POOL_SETTINGS: dict[str, Any] = {
    "enabled": True,
    "scaleDownCPURequestRatioLimit": 0.75,
    "neededMarkedTimeSeconds": 0,
    "minimumNodeAgeSeconds": 0,
    "minNodes": 1,
    "scaleUpCooldownSeconds": 0,
    "drainIntervalSeconds": 0,
    # Long enough that no drain is rolled back in either clock (simulated runs are RUN_INTERVAL apart).
    "drainTimeoutSeconds": 7200,
    "removalTimeoutSeconds": 7200,
    "retryBackoffSeconds": 1800,
}
CONFIG: dict[str, Any] = {"nodePools": {POOL: POOL_SETTINGS}}

Record = dict[str, Any]  # one run's figures (see `record`)


# -- what both sides record -----------------------------------------------------------------------


def is_daemon(pod: Mapping[str, Any]) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or [])


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def record(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], *, drained: Sequence[str]) -> Record:
    """Node count, nodes that started draining in the run, pods Pending, pods per node (not DaemonSet pods)."""
    names = sorted(name_of(node) for node in nodes)
    zones = {name_of(node): (node["metadata"].get("labels") or {}).get(ZONE_LABEL, "") for node in nodes}
    per_node = {name: 0 for name in names}
    mix = {name: dict.fromkeys(APPS, 0) for name in names}
    cpu = {name: 0 for name in names}
    pending = 0
    for pod in pods:
        if is_terminal(pod) or pod["metadata"].get("deletionTimestamp"):
            continue
        node = node_of(pod)
        if node is None:
            if not is_daemon(pod):
                pending += 1
            continue
        if node not in per_node:
            continue  # on a node the stand-in deleted, before the garbage collector has come
        cpu[node] += sum(_millis(c["resources"]["requests"]["cpu"]) for c in pod["spec"]["containers"])
        if not is_daemon(pod):
            per_node[node] += 1
            app = (pod["metadata"].get("labels") or {}).get("app", "")
            if app in mix[node]:
                mix[node][app] += 1
    allocatable = _millis(machines.allocatable(MACHINE)["cpu"])
    return {
        "nodes": len(names),
        "drained": list(drained),
        "pending": pending,
        "podsPerNode": per_node,
        # The layout up to which node of a zone holds what: kube-scheduler breaks ties between equal
        # nodes by the order its parallel filters found them (schedule_one.go), the model at random.
        "layout": sorted([zones[name], *mix[name].values()] for name in names),
        "mix": mix,
        "cpuPercent": {name: round(100 * used / allocatable) for name, used in cpu.items()},
    }


def _millis(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def draining(nodes: Sequence[Mapping[str, Any]]) -> set[str]:
    return {name_of(node) for node in nodes if DRAIN_STARTED_AT in (node["metadata"].get("annotations") or {})}


def emptied(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """The STAND-IN's choice: cordoned by node-compactor, only DaemonSet or finished pods left."""
    busy = {node_of(pod) for pod in pods if not is_daemon(pod) and not is_terminal(pod)}
    return sorted(name for name in draining(nodes) if name not in busy)


# -- the real side --------------------------------------------------------------------------------


def deployment(name: str, cpu: str, memory: str, replicas: int, zone_spread: bool) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {POOL_LABEL: POOL},
        "containers": [
            {"name": "app", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
    }
    if zone_spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def listed(cluster: KubeCluster, path: str, kind: str, api_version: str) -> list[dict[str, Any]]:
    """A list's items as `kubectl get -o json` prints them (each with its kind and apiVersion)."""
    return [{"apiVersion": api_version, "kind": kind, **item} for item in cluster.items(path)]


def real_state(cluster: KubeCluster) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = listed(cluster, "/api/v1/nodes", "Node", "v1")
    pods = listed(cluster, "/api/v1/pods", "Pod", "v1")
    return nodes, pods


def settled(cluster: KubeCluster, namespace: str) -> bool:
    """Each Deployment has its replicas, each Ready or Unschedulable, none terminating; a DaemonSet pod per node."""
    nodes = {name_of(node) for node in cluster.items("/api/v1/nodes")}
    pods = [pod for pod in cluster.pods(namespace) if not is_terminal(pod)]
    if any(pod["metadata"].get("deletionTimestamp") and node_of(pod) in nodes for pod in pods):
        return False
    for name in APPS:
        body = cluster.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        mine = [pod for pod in pods if pod["metadata"]["labels"].get("app") == name]
        if len(mine) != body["spec"]["replicas"] or (body.get("status") or {}).get("replicas") != len(mine):
            return False
        for pod in mine:
            conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
            unschedulable = (conditions.get("PodScheduled") or {}).get("reason") == "Unschedulable"
            if not is_ready(pod) and not unschedulable:
                return False
    daemon_nodes = {node_of(pod) for pod in pods if is_daemon(pod) and is_ready(pod)}
    if not nodes <= daemon_nodes:
        return False
    for pdb in cluster.items(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"):
        status = pdb.get("status") or {}
        healthy = sum(1 for pod in pods if pod["metadata"]["labels"].get("app") == name_of(pdb) and is_ready(pod))
        if (
            status.get("observedGeneration") != pdb["metadata"].get("generation")
            or status.get("currentHealthy") != healthy
        ):
            return False
    return True


def real_side(cluster: KubeCluster, runs: int, keep: Path | None, index: int) -> tuple[dict[str, Any], list[Record]]:
    """Lay out the pool, snapshot it, then `runs` node-compactor runs each followed by the STAND-IN."""
    namespace = cluster.new_namespace("consolidate")
    test = Scenario(cluster, namespace)
    allocatable = machines.allocatable(MACHINE)
    records: list[Record] = []
    try:
        names: list[str] = []
        for phase in ("first", "second"):
            added = []
            for zone in ZONES:
                added += [f"{POOL}-{zone[-1]}-{phase}-{n}" for n in range(1, NODES_PER_ZONE + 1)]
            for name in added:
                zone = next(zone for zone in ZONES if name.startswith(f"{POOL}-{zone[-1]}-"))
                test.add_node(
                    name, pool=POOL, zone=zone, cpu=allocatable["cpu"], memory=allocatable["memory"], wait=False
                )
            cluster.wait_nodes_ready(added)
            names += added
            if phase == "first":
                test.daemonset("node-agent", cpu=DAEMON_CPU, pool=POOL)
            test.wait_daemonset("node-agent", names)
            for when, name, cpu, memory, replicas, zone_spread, _ in WORKLOADS:
                if when != phase:
                    continue
                cluster.create(
                    f"/apis/apps/v1/namespaces/{namespace}/deployments",
                    deployment(name, cpu, memory, replicas, zone_spread),
                )
                cluster.wait_deployment(namespace, name, replicas)
        for _, name, *_, budget in WORKLOADS:
            test.pdb(name, name, **{_snake(key): value for key, value in budget.items()})
        wait_for("the pool has settled", lambda: settled(cluster, namespace), timeout=60)
        nodes, pods = real_state(cluster)
        pdbs = listed(cluster, "/apis/policy/v1/poddisruptionbudgets", "PodDisruptionBudget", "policy/v1")
        snapshot = {"apiVersion": "v1", "kind": "List", "items": [*nodes, *pods, *pdbs]}
        if keep is not None:
            (keep / f"snapshot-{index}.json").write_text(json.dumps(snapshot))
        start = record(nodes, pods, drained=[])
        for _ in range(runs):
            before = draining(real_state(cluster)[0])
            run = cluster.compactor("run", config=CONFIG, timeout=400)
            if run.exit_code != 0:
                raise AssertionError(f"node-compactor's run failed:\n{run}")
            nodes, pods = real_state(cluster)
            drained = sorted(draining(nodes) - before)
            for name in emptied(nodes, pods):
                cluster.delete_node(name)
                test.nodes.remove(name)
            wait_for("the cluster has settled after the run", lambda: settled(cluster, namespace), timeout=120)
            nodes, pods = real_state(cluster)
            entry = record(nodes, pods, drained=drained)
            report = run.report
            held = report.get("heldBy") or {}
            action = report["decision"]["action"]
            entry["action"] = action if action != "none" else held.get("kind", "none")
            entry["seconds"] = round(run.seconds, 1)
            records.append(entry)
    finally:
        test.close()
    return {"snapshot": snapshot, "start": start}, records


def _snake(key: str) -> str:
    return {"maxUnavailable": "max_unavailable", "minAvailable": "min_available"}[key]


# -- the simulator --------------------------------------------------------------------------------


def simulated_side(snapshot_file: Path, runs: int, seed: int) -> tuple[Record, list[Record]]:
    """The same runs in the simulator, from the real cluster's snapshot, with the same STAND-IN."""
    config = config_module.validate(CONFIG, source="calibration")
    setup = kubectl.load(str(snapshot_file), config=config, hours=1)
    setup = dataclasses.replace(setup, seed=seed)
    cluster = runner.build(setup)
    world = cluster.world
    strategy = NodeCompactor(world, config, cluster.settle, setup.run_budget_seconds)

    def state() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return list(world.nodes.values()), list(world.pods.values())

    start = record(*state(), drained=[])
    records = []
    now: datetime = setup.start
    for _ in range(runs):
        world.now = now
        cluster.settle(now, now)
        before = draining(state()[0])
        strategy.act(now)
        cluster.settle(now, now)
        nodes, pods = state()
        drained = sorted(draining(nodes) - before)
        for name in emptied(nodes, pods):
            world.delete_node(name, actor="stand-in", at=now)
        cluster.settle(now, now)
        entry = record(*state(), drained=drained)
        entry["action"] = strategy.decision
        records.append(entry)
        now += RUN_INTERVAL
        # Pods the run's evictions replaced are Ready by the next run (startupSeconds 30), as on kwok.
    return start, records


# -- the comparison -------------------------------------------------------------------------------


def table(real: Sequence[Sequence[Record]], simulated: Sequence[Sequence[Sequence[Record]]]) -> list[str]:
    """Markdown rows: per run, node count and drained node of each real repeat beside the simulator's seeds."""
    lines = [
        "| run | "
        + " | ".join(f"real {i + 1}" for i in range(len(real)))
        + " | simulator (each repeat's snapshot, all seeds) |"
    ]
    lines.append("|---" * (len(real) + 2) + "|")
    for run in range(len(real[0])):
        cells = []
        for records in real:
            entry = records[run]
            cells.append(f"{entry['nodes']} {'/'.join(entry['drained']) or '-'} p{entry['pending']}")
        sims = []
        for repeat in simulated:
            counts = Counter(
                f"{seed[run]['nodes']} {'/'.join(seed[run]['drained']) or '-'} p{seed[run]['pending']}"
                for seed in repeat
            )
            sims.append(", ".join(f"{text} x{n}" for text, n in counts.most_common()))
        lines.append(f"| {run + 1} | " + " | ".join(cells) + " | " + " ; ".join(sims) + " |")
    return lines


def differences(real: Sequence[Record], simulated: Sequence[Sequence[Record]]) -> list[dict[str, Any]]:
    """Per run, the seeds whose node count, drained node, pending count or pods per node differ from the real run."""
    found = []
    for run, entry in enumerate(real):
        for seed, records in enumerate(simulated, start=1):
            other = records[run]
            fields = [key for key in ("nodes", "drained", "pending", "layout", "action") if other[key] != entry[key]]
            if fields:
                found.append(
                    {
                        "run": run + 1,
                        "seed": seed,
                        "fields": fields,
                        "real": {key: entry[key] for key in fields},
                        "simulated": {key: other[key] for key in fields},
                    }
                )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="real repeats (each on fresh nodes)")
    parser.add_argument("--seeds", type=int, default=10, help="simulated seeds per repeat (1..N)")
    parser.add_argument("--runs", type=int, default=8, help="node-compactor runs on each side")
    parser.add_argument("--keep", type=Path, help="write the snapshots and the results here")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="above-50", help="the Deployments' requests")
    parser.add_argument(
        "--balanced-allocation-1-35",
        action="store_true",
        help="score BalancedAllocation in the simulator as kube-scheduler 1.35 did (balanced_allocation_1_35)",
    )
    parser.add_argument("--simulate-only", type=Path, help="a --keep directory: the simulator against its real runs")
    args = parser.parse_args(argv)
    global WORKLOADS
    WORKLOADS = SHAPES[args.shape]
    if args.balanced_allocation_1_35:
        scheduler._balanced_allocation = balanced_allocation_1_35
    if args.simulate_only is not None:
        kept = json.loads((args.simulate_only / "results.json").read_text())
        seeds = range(1, args.seeds + 1)
        again = [
            [simulated_side(args.simulate_only / f"snapshot-{i + 1}.json", len(runs), seed)[1] for seed in seeds]
            for i, runs in enumerate(kept["real"])
        ]
        report(kept["start"], kept["real"], again, None)
        return 0
    missing = controlplane.missing_binaries()
    if missing:
        print(controlplane.missing_message(missing))
        return 2
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    real: list[list[Record]] = []
    starts: list[Record] = []
    simulated: list[list[list[Record]]] = []
    with tempfile.TemporaryDirectory() as workdir:
        with controlplane.running(Path(workdir)) as plane:
            cluster = KubeCluster(plane)
            grant_compactor_rbac(cluster)  # deploy/rbac.yaml for node-compactor's user, as the e2e tests do
            for index in range(args.repeat):
                started = time.monotonic()
                layout, records = real_side(cluster, args.runs, args.keep, index + 1)
                print(f"real repeat {index + 1}: {time.monotonic() - started:.0f} s", flush=True)
                (Path(workdir) / f"snapshot-{index + 1}.json").write_text(json.dumps(layout["snapshot"]))
                real.append(records)
                starts.append(layout["start"])
        for index in range(args.repeat):
            snapshot_file = Path(workdir) / f"snapshot-{index + 1}.json"
            repeat = []
            for seed in range(1, args.seeds + 1):
                start, records = simulated_side(snapshot_file, args.runs, seed)
                if start["podsPerNode"] != starts[index]["podsPerNode"]:
                    raise AssertionError(
                        f"the simulator did not start where the real cluster was: {start} {starts[index]}"
                    )
                repeat.append(records)
            simulated.append(repeat)
    report(starts, real, simulated, args.keep)
    return 0


def report(
    starts: Sequence[Record],
    real: Sequence[Sequence[Record]],
    simulated: Sequence[Sequence[Sequence[Record]]],
    keep: Path | None,
) -> None:
    found = [differences(records, simulated[i]) for i, records in enumerate(real)]
    result: dict[str, Any] = {
        "start": list(starts),
        "real": list(real),
        "simulated": [[copy.deepcopy(records) for records in repeat] for repeat in simulated],
        "differences": found,
        "summary": {
            "realFinalNodes": [records[-1]["nodes"] for records in real],
            "simulatedFinalNodesMean": [
                round(statistics.mean(seed[-1]["nodes"] for seed in repeat), 2) for repeat in simulated
            ],
        },
    }
    if keep is not None:
        (keep / "results.json").write_text(json.dumps(result, indent=2))
    counted = [dict(Counter(f"run {d['run']}: {'+'.join(d['fields'])}" for d in repeat)) for repeat in found]
    starting = [{"cpuPercent": start["cpuPercent"], "layout": start["layout"]} for start in starts]
    print(json.dumps({"start": starting, "seedsDiffering": counted, "summary": result["summary"]}, indent=1))
    print("\n".join(table(real, simulated)))


def balanced_allocation_1_35(target: NodeState, used: list[int], pod: Pod) -> int:
    """NodeResourcesBalancedAllocation as kube-scheduler 1.35 and earlier score it, for
    `--balanced-allocation-1-35`: the balance after placement alone, 100 x (1 - |cpu share - memory
    share| / 2), each share capped at 1. The simulator scores as 1.36 does since this calibration
    found the difference (compactor.simulation.scheduler._balanced_allocation, docs/savings.md); the
    flag replays the model as it was before."""
    allocatable = target.node.allocatable
    return fit.balanced_resource_score(
        allocatable.cpu_millis,
        allocatable.memory_bytes,
        used[0] + pod.requests.cpu_millis,
        used[1] + pod.requests.memory_bytes,
    )


if __name__ == "__main__":
    raise SystemExit(main())
