"""A planner given the proofs of an earlier plan on the same cluster (`proof.Memo`) decides the same without
proving again; the simulator keeps them only while its world does not change."""

from __future__ import annotations

from datetime import timedelta

import pytest

from compactor.core import planner, proof
from compactor.settings.config import DEFAULT_POOL_LABEL, Config
from compactor.simulation.strategies import NodeCompactor
from tests.builders import NOW, counting_proofs, make_config, make_snapshot
from tests.simulation import builders as sim
from tests.unit.test_reservations import tight


def test_a_plan_with_the_proofs_of_the_same_cluster_decides_the_same_without_proving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes, pods = tight()  # n1's proof fails, then succeeds with room kept on n2: two proofs
    config = make_config()
    proved = counting_proofs(monkeypatch)
    alone = planner.plan(make_snapshot(nodes, pods), config, now=NOW)
    assert proved == ["n1", "n1"]
    memo = proof.Memo()
    first = planner.plan(make_snapshot(nodes, pods), config, now=NOW, proofs=memo)
    again = planner.plan(make_snapshot(nodes, pods), config, now=NOW, proofs=memo)
    assert proved == ["n1", "n1"] * 2  # the first plan with the memo proved; the second did not
    assert first.decision == again.decision == alone.decision
    assert alone.decision.reserved == ("n2",)
    assert [node.blockers for node in again.nodes] == [node.blockers for node in alone.nodes]


def test_the_simulator_proves_again_only_when_its_world_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """n1's 1.5-cpu pod fits on neither other node (0.9 cpu free on each): every run proves it and fails, and
    node-compactor's runs in the simulator reuse the last run's proofs while nothing changed. Once the pod is
    replaced by one of 0.8 cpu, the next run proves again and drains n1 (the last proofs would still say no)."""
    world = sim.world()
    for name, used in (("n1", "1500m"), ("n2", "3100m"), ("n3", "3100m")):
        sim.add_node(world, name)
        sim.add_pod(world, f"{name}-pod", node=name, cpu=used, memory="1Gi")
    pool = {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75, "neededMarkedTimeSeconds": 0}
    config = Config.model_validate({"poolLabel": DEFAULT_POOL_LABEL, "nodePools": {sim.POOL: pool}})
    strategy = NodeCompactor(world, config, lambda step, moment: None, budget_seconds=60)
    proved = counting_proofs(monkeypatch)
    made = []
    for minutes in range(0, 20, 5):
        before = len(proved)
        strategy.act(sim.START + timedelta(minutes=minutes))
        made.append(len(proved) - before)
        assert strategy.decision == "no-fit"
    assert made[0] > 0 and made[2:] == [0, 0]  # the first run marks nodes (a change); then nothing changes
    world.delete_pod("default/n1-pod", actor="test", at=sim.START)
    sim.add_pod(world, "n1-smaller", node="n1", cpu="800m", memory="1Gi")  # fits in n2's or n3's 0.9 cpu
    before = len(proved)
    strategy.act(sim.START + timedelta(minutes=20))
    assert len(proved) > before
    assert strategy.decision == "drain"
