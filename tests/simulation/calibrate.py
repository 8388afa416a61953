"""Calibration: the simulator's scheduler and ReplicaSet controller against the real ones.

`python -m tests.simulation.calibrate [--repeat N]` starts the e2e control plane
(tests/e2e/controlplane.py: real kube-apiserver, kube-controller-manager,
kube-scheduler and kwok nodes; build it with tests/e2e/toolchain/build.sh),
lays out a workload shape there and in the simulator with the same nodes and
requests, and prints how the pods spread over nodes and zones in each: after
the Deployments scale up, and after they scale in, the evening's decline
compressed to seconds. The real cluster runs no Cluster Autoscaler (it does not
build from the Go module proxy; see tests/e2e), so node counts over time are
not compared here, only where pods go and which ones leave.

It must never run in the default test session (it starts a control plane and
takes minutes): it is a module, not a test, and writes nothing outside a
temporary directory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from compactor.core.prices import machines
from compactor.simulation import runner, scenario
from tests.e2e import controlplane
from tests.e2e.cluster import KubeCluster, Scenario, node_of

POOL = "default-pool"
MACHINE = "e2-standard-4"
ZONES = ("europe-west1-b", "europe-west1-c", "europe-west1-d")
NODES_PER_ZONE = 2
# The shape: two Deployments scaled up, then in (peak, evening), created in this order.
WORKLOADS = (("web", "250m", "512Mi", 36, 14), ("api", "500m", "1Gi", 18, 8))

Layout = dict[str, Counter[str]]  # app -> node -> pods


def real_layouts(plane: controlplane.ControlPlane) -> tuple[Layout, Layout, dict[str, str]]:
    """Scale up, then in, on kwok nodes with the real controllers and scheduler; the two layouts and node zones."""
    cluster = KubeCluster(plane)
    namespace = cluster.new_namespace("calibrate")
    test = Scenario(cluster, namespace)
    allocatable = machines.allocatable(MACHINE)
    zones: dict[str, str] = {}
    try:
        for zone in ZONES:
            for name in test.add_pool(
                POOL, NODES_PER_ZONE, zone=zone, cpu=allocatable["cpu"], memory=allocatable["memory"]
            ):
                zones[name] = zone
        for app, cpu, memory, peak, _ in WORKLOADS:
            test.deployment(app, replicas=peak, cpu=cpu, memory=memory, pool=POOL)
        up = {app: Counter(node_of(pod) or "" for pod in test.pods(app)) for app, *_ in WORKLOADS}
        for app, *_, evening in WORKLOADS:
            test.scale(app, evening)
        down = {app: Counter(node_of(pod) or "" for pod in test.pods(app)) for app, *_ in WORKLOADS}
    finally:
        test.close()
    return up, down, zones


def simulated_layouts(seed: int) -> tuple[Layout, Layout, dict[str, str]]:
    """The same shape in the simulator: its scheduler places the pods, its ReplicaSets scale them in."""

    def points(peak: int, evening: int) -> dict[str, Any]:
        return {"points": [[0, peak], [12.2, peak], [12.25, evening], [23.9, evening]]}

    data: dict[str, Any] = {
        "name": "calibration",
        "seed": seed,
        "start": "2026-11-20T12:00:00Z",
        "hours": 1,
        "warmupHours": 0,
        "pools": [
            {"name": POOL, "machineType": MACHINE, "zones": list(ZONES), "initialNodes": len(ZONES) * NODES_PER_ZONE}
        ],
        "deployments": [
            {"name": app, "pool": POOL, "requests": {"cpu": cpu, "memory": memory}, "replicas": points(peak, evening)}
            for app, cpu, memory, peak, evening in WORKLOADS
        ],
    }
    setup = scenario.parse(orjson.dumps(data), source="calibration")
    cluster = runner.build(setup)
    world = cluster.world
    zones = {name: world.node_record(name).zone or "" for name in world.nodes}  # type: ignore[union-attr]

    def layout() -> Layout:
        found: Layout = {}
        for spec in setup.workloads:
            app = spec.owner_name.rsplit("-", 1)[0]
            found[app] = Counter(world.pod_record(key).node_name or "" for key in world.owned(spec.key))
        return found

    up = layout()
    later = setup.start + timedelta(minutes=20)
    world.now = later
    cluster.settle(later, later)
    return up, layout(), zones


def figures(layout: Layout, zones: Mapping[str, str]) -> dict[str, Any]:
    """Per app: pods per node (sorted), their spread (max - min) and pods per zone (sorted)."""
    found = {}
    for app, per_node in layout.items():
        counts = sorted((per_node.get(node, 0) for node in zones), reverse=True)
        per_zone: Counter[str] = Counter()
        for node, count in per_node.items():
            per_zone[zones.get(node, "?")] += count
        found[app] = {
            "perNode": counts,
            "nodeSpread": counts[0] - counts[-1],
            "perZone": sorted(per_zone.values(), reverse=True),
            "emptyNodes": sum(1 for count in counts if count == 0),
        }
    return found


def summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean node spread and empty nodes over repeated runs, per phase and app."""
    result: dict[str, Any] = {}
    for phase in ("scaledUp", "scaledIn"):
        for app, *_ in WORKLOADS:
            spreads = [run[phase][app]["nodeSpread"] for run in runs]
            empties = [run[phase][app]["emptyNodes"] for run in runs]
            result[f"{phase}.{app}"] = {
                "nodeSpreadMean": round(statistics.mean(spreads), 2),
                "nodeSpreadMax": max(spreads),
                "emptyNodesMean": round(statistics.mean(empties), 2),
                "perNodeExample": runs[0][phase][app]["perNode"],
                "perZoneExample": runs[0][phase][app]["perZone"],
            }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="real runs (each a fresh namespace and nodes)")
    parser.add_argument("--seeds", type=int, default=20, help="simulated runs (seeds 1..N)")
    args = parser.parse_args(argv)
    missing = controlplane.missing_binaries()
    if missing:
        print(controlplane.missing_message(missing))
        return 2
    real = []
    with tempfile.TemporaryDirectory() as workdir, controlplane.running(Path(workdir)) as plane:
        for _ in range(args.repeat):
            up, down, zones = real_layouts(plane)
            real.append({"scaledUp": figures(up, zones), "scaledIn": figures(down, zones)})
    simulated = []
    for seed in range(1, args.seeds + 1):
        up, down, zones = simulated_layouts(seed)
        simulated.append({"scaledUp": figures(up, zones), "scaledIn": figures(down, zones)})
    print(json.dumps({"real": summary(real), "simulated": summary(simulated)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
