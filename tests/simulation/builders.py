"""Small builders for simulator tests: a world with nodes and pods, a scenario as a dict, a cluster from it."""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from compactor.settings.config import DEFAULT_POOL_LABEL
from compactor.simulation import objects, runner, scenario
from compactor.simulation.metrics import Recorder, Series
from compactor.simulation.model import PoolSpec, Setup
from compactor.simulation.world import World

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LONG_AGO = START - timedelta(days=2)
POOL = "default-pool"
SMALL = {"cpu": "4", "memory": "16Gi", "pods": "110"}


def pool_spec(name: str = POOL, *, zones: tuple[str, ...] = ("zone-a",), min_nodes: int = 1) -> PoolSpec:
    return PoolSpec(name, "e2-standard-4", dict(SMALL), zones, min_nodes, 20)


def world(*pools: PoolSpec) -> World:
    return World(start=START, pool_label=DEFAULT_POOL_LABEL, pools=pools or (pool_spec(),))


def add_node(
    target: World,
    name: str,
    *,
    pool: str = POOL,
    zone: str = "zone-a",
    allocatable: Mapping[str, str] = SMALL,
    taints: list[dict[str, str]] | None = None,
    created: datetime = LONG_AGO,
    labels: Mapping[str, str] | None = None,
) -> None:
    target.add_node(
        objects.node_object(
            name,
            pool=pool,
            pool_label=DEFAULT_POOL_LABEL,
            zone=zone,
            machine_type="e2-standard-4",
            allocatable=allocatable,
            labels=dict(labels or {}),
            taints=list(taints or []),
            created=created,
        )
    )


def add_pod(
    target: World,
    name: str,
    *,
    node: str | None = None,
    cpu: str = "500m",
    memory: str = "512Mi",
    app: str | None = None,
    owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
    namespace: str = "default",
    ready: bool = True,
    preemption_policy: str | None = None,
    **template: Any,
) -> str:
    pod = objects.stamp_pod(
        objects.pod_template(
            namespace=namespace, labels={"app": app or name}, requests={"cpu": cpu, "memory": memory}, **template
        ),
        name=name,
        owner_kind=owner[0] if owner else None,
        owner_name=owner[1] if owner else None,
        created=target.now,
        node_name=node,
    )
    if preemption_policy is not None:
        pod["spec"]["preemptionPolicy"] = preemption_policy
    return target.add_pod(pod, ready=ready)


def add_pdb(target: World, app: str, **budget: int | str) -> str:
    """`budget` in the API's spelling: minAvailable=2, maxUnavailable="25%"."""
    pdb = objects.pdb_object(
        "default",
        app,
        {"app": app},
        min_available=budget.get("minAvailable"),
        max_unavailable=budget.get("maxUnavailable"),
    )
    target.add_pdb(pdb)
    return f"default/{app}"


SCENARIO: dict[str, Any] = {
    "name": "test",
    "seed": 3,
    "start": "2026-11-20T17:00:00Z",
    "hours": 2,
    "warmupHours": 0,
    "stepSeconds": 60,
    "profiles": {"evening": [[17, 1.0], [18, 0.7], [19, 0.45], [20, 0.4], [24, 0.4]]},
    "pools": [{"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a", "zone-b"], "minNodes": 1}],
    "daemonSets": [{"name": "agent", "requests": {"cpu": "100m", "memory": "200Mi"}}],
    "deployments": [
        {
            "name": "web",
            "pool": POOL,
            "requests": {"cpu": "300m", "memory": "512Mi"},
            "replicas": {"profile": "evening", "peak": 80},
            "pdb": {"maxUnavailable": 1},
        },
        {
            "name": "api",
            "pool": POOL,
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "replicas": {"profile": "evening", "peak": 40},
            "pdb": {"minAvailable": "75%"},
        },
    ],
    "compactor": {
        "nodePools": {
            POOL: {
                "enabled": True,
                "scaleDownCPURequestRatioLimit": 0.75,
                "minimumNodeAgeSeconds": 600,
                "neededMarkedTimeSeconds": 120,
            }
        }
    },
}


def scenario_data(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(SCENARIO)
    data.update(changes)
    return data


def setup_from(data: Mapping[str, Any]) -> Setup:
    import orjson

    return scenario.parse(orjson.dumps(dict(data)), source="test.json")


def cluster_from(data: Mapping[str, Any]) -> runner.Cluster:
    return runner.build(setup_from(data))


def table_columns(table: str) -> list[str]:
    """The column names of `simulate`'s table, read from its header: the line starting with STRATEGY and, where a
    name is split in two, the line above it (each column right-aligned under its top half)."""
    lines = table.splitlines()
    at = next(index for index, line in enumerate(lines) if line.startswith("STRATEGY"))
    bottom = lines[at]
    top = lines[at - 1] if at and lines[at - 1].startswith(" ") else ""
    names = []
    previous_end = 0
    for cell in re.finditer(r"\S+(?: \S+)*", bottom):
        upper = top[previous_end : cell.end()].strip()
        joiner = "" if upper.endswith("-") or not upper else " "
        names.append(upper + joiner + cell.group())
        previous_end = cell.end()
    return names


def strategy_result(
    name: str,
    nodes_by_pool: Mapping[str, list[int]],
    *,
    decisions: Sequence[str | None] | None = None,
    summary: Mapping[str, int] | None = None,
    evicted: int = 0,
    preempted_placeholders: int = 0,
) -> runner.StrategyResult:
    """A strategy's result as the runner returns it, one step a minute: its nodes by pool, and for a planner its
    decision at each step; its evictions booked to itself."""
    steps = len(next(iter(nodes_by_pool.values())))
    recorder = Recorder(evicted=Counter({name: evicted} if evicted else {}))
    recorder.preempted_placeholders = preempted_placeholders
    series = Series(
        minutes=[float(minute) for minute in range(steps)],
        nodes=[sum(counts) for counts in zip(*nodes_by_pool.values(), strict=True)],
        pending=[0] * steps,
        nodes_by_pool={pool: list(counts) for pool, counts in nodes_by_pool.items()},
        decisions=list(decisions) if decisions is not None else [None] * steps,
    )
    return runner.StrategyResult(name, recorder, series, dict(summary or {}), [], 0.0)
