"""The preview (`core.preview`): the first drain of a cluster whose waits are not over yet, and from when."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from compactor.core import path
from compactor.core.model import DRAIN_FAILED_AT
from compactor.core.plan import Plan
from compactor.core.timing import format_stamp
from tests.builders import NOW, ago, base_pods, make_config, make_node, make_pod, make_snapshot, stamp


def plan_with_path(light: dict[str, Any], **pool: Any) -> Plan:
    nodes = [make_node("n1", **light), make_node("n2", marked_since=None), make_node("n3", marked_since=None)]
    config = make_config(pools={"default-pool": pool}) if pool else make_config()
    return path.plan_with_path(make_snapshot(nodes, [make_pod("web", node="n1"), *base_pods()]), config, now=NOW)


@pytest.mark.parametrize(
    ("light", "pool", "earliest", "why"),
    [
        pytest.param({"marked_since": None}, {}, NOW + timedelta(minutes=5), "neededMarkedTimeSeconds", id="new-mark"),
        pytest.param({"marked_since": ago(120)}, {}, NOW + timedelta(minutes=3), "set 2026-11-21T11:58:00Z", id="mark"),
        pytest.param(
            {"created": ago(600)},
            {"scaleUpCooldownSeconds": 0},
            NOW + timedelta(minutes=10),
            "minimumNodeAgeSeconds",
            id="young-node",
        ),
        pytest.param(
            {"annotations": {DRAIN_FAILED_AT: stamp(ago(60))}},
            {},
            NOW + timedelta(minutes=29),
            "retryBackoffSeconds",
            id="backoff",
        ),
        pytest.param(
            {},
            {"disruptionWindows": [{"schedule": "0 22 * * *", "durationMinutes": 60}]},
            NOW + timedelta(hours=10),
            "disruptionWindows",
            id="window",
        ),
    ],
)
def test_the_preview_names_the_node_and_when_its_last_wait_ends(
    light: dict[str, Any], pool: dict[str, Any], earliest: Any, why: str
) -> None:
    plan = plan_with_path(light, **pool)
    assert plan.decision.action == "none"
    assert plan.preview is not None
    assert (plan.preview.node, plan.preview.pool, plan.preview.earliest) == ("n1", "default-pool", earliest)
    assert why in plan.preview.reason
    assert f"it waits until {format_stamp(earliest)}" in plan.preview.reason


def test_a_plan_that_drains_now_has_no_preview() -> None:
    plan = plan_with_path({})
    assert plan.decision.action == "drain"
    assert plan.preview is None


def test_nothing_to_preview_when_no_drain_would_follow_the_waits() -> None:
    # n1's pod fits nowhere once the waits are over either (n2 and n3 hold one pod at most): waiting
    # changes nothing.
    nodes = [make_node("n1", marked_since=None)] + [make_node(n, marked_since=None, pods=1) for n in ("n2", "n3")]
    snapshot = make_snapshot(nodes, [make_pod("web", node="n1"), *base_pods()])
    plan = path.plan_with_path(snapshot, make_config(), now=NOW)
    assert plan.decision.action == "none"
    assert plan.path is not None and plan.path.steps == ()
    assert plan.preview is None


def test_the_planner_alone_never_computes_a_preview() -> None:
    from compactor.core import planner

    nodes = [make_node("n1", marked_since=None), make_node("n2", marked_since=None), make_node("n3", marked_since=None)]
    plan = planner.plan(make_snapshot(nodes, [make_pod("web", node="n1"), *base_pods()]), make_config(), now=NOW)
    assert plan.preview is None
