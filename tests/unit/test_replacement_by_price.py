"""Consolidation by price (DESIGN "Node replacement", rule 10 and rule 8 with prices): several new nodes, machine
types GKE creates pools for, Spot, and a replacement ranked against the run's deletion by saving per pod."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest

from compactor import report
from compactor.actuation import placeholders
from compactor.core import planner
from compactor.core.cluster import ClusterView
from compactor.core.model import (
    DRAIN_STARTED_AT,
    REPLACED_BY,
    REPLACEMENT_LABEL,
    Node,
    Pod,
    PoolAutoscaling,
    Resources,
    Snapshot,
    Taint,
)
from compactor.core.plan import Plan
from compactor.core.prices import machines, pricing
from compactor.core.replacement import search, templates
from compactor.errors import ConfigError
from compactor.settings.config import Config, parse
from tests.builders import (
    LONG_AGO,
    NOW,
    ago,
    make_config,
    make_node,
    make_placeholder,
    make_pod,
    node_report,
    stamp,
    toleration,
)

BIG = "big-pool"
SMALL = "small-pool"
NAMESPACE = "node-compactor"
ZONE = "europe-west1-b"
SPOT_TOLERATION = toleration("cloud.google.com/gke-spot", "true", "NoSchedule")


def config(*, targets: tuple[str, ...] = (SMALL,), **replace_settings: Any) -> Config:
    """big-pool (0.40/h a node) replaces into small-pool (0.13/h a node)."""
    settings: dict[str, Any] = {"enabled": True, "targetPools": list(targets), **replace_settings}
    return make_config(
        pools={
            BIG: {"pricePerHour": 0.40, "minNodes": 0, "replacement": settings},
            SMALL: {"enabled": False, "pricePerHour": 0.13},
        }
    )


def big(name: str, *, marked_since: datetime | None = None, **fields: Any) -> Node:
    """A node of big-pool (not marked unless told: busy) that has carried `replaceable-since` long enough."""
    annotations = {"node-compactor.dev/replaceable-since": stamp(LONG_AGO), **(fields.pop("annotations", None) or {})}
    return make_node(
        name, cpu="8", memory="32Gi", pool=BIG, zone=ZONE, marked_since=marked_since, annotations=annotations, **fields
    )


def small(name: str = "s1") -> Node:
    return make_node(name, cpu="4", memory="16Gi", pool=SMALL, zone=ZONE, marked_since=None)


def pods_of(node: str, *cpus: str, memory: str = "1Gi", **fields: Any) -> list[Pod]:
    return [make_pod(f"{node}-p{index}", node=node, cpu=cpu, memory=memory, **fields) for index, cpu in enumerate(cpus)]


def plan_for(
    nodes: list[Node],
    pods: list[Pod],
    settings: Config,
    *,
    creates_pools: bool | None = None,
    held: tuple[Pod, ...] = (),
    now_offset: float = 0,
) -> Plan:
    snapshot = Snapshot(tuple(nodes), tuple(pods), placeholders=held, creates_pools=creates_pools)
    return planner.plan(snapshot, settings, now=NOW + timedelta(seconds=now_offset))


def a_busy_big_node_whose_pods_need_two_small_ones() -> tuple[list[Node], list[Pod]]:
    """b1 holds four 1.8-cpu pods (90% busy, 0.40/h); s1 is full. One small node (4 cpu) takes two of them:
    two small nodes (0.26/h) take all four and save 35%."""
    nodes = [big("b1"), small()]
    pods = pods_of("b1", "1800m", "1800m", "1800m", "1800m") + pods_of("s1", "4")
    return nodes, pods


# -- several new nodes ----------------------------------------------------------------------------------------


def test_a_busy_node_is_replaced_by_two_new_nodes_when_one_cannot_hold_its_pods() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    plan = plan_for(nodes, pods, config())
    chosen = plan.replacement
    assert chosen is not None and chosen.step == "create"
    assert chosen.nodes == ("b1",) and chosen.new_nodes == 2
    assert chosen.price_per_hour == pytest.approx(0.26) and chosen.savings_per_hour == pytest.approx(0.14)
    assert chosen.placeholders == (
        search.placeholder_name(["b1"], SMALL),
        search.placeholder_name(["b1"], SMALL, 1),
    )
    assert chosen.placeholders[0] != chosen.placeholders[1]
    # Each placeholder asks for the two pods the proof put on its node, not for all four.
    assert [ask.cpu_millis for ask in chosen.placeholder_requests] == [3600, 3600]
    assert "-> 2 " in chosen.reason


def test_the_new_nodes_are_counted_up_until_the_pods_fit_not_only_to_the_summed_room() -> None:
    """b1's three 2.1-cpu pods need 6.3 cpu; s1 and s2 have 1.8 free each (3.6 together), so the summed room
    asks for one new 4-cpu node, yet no node holds two such pods and the free room holds none: three new nodes
    take them, and at 0.08/h each still save 40%."""
    settings = make_config(
        pools={
            BIG: {
                "pricePerHour": 0.40,
                "minNodes": 0,
                "replacement": {"enabled": True, "targetPools": [SMALL], "maxNewNodes": 3},
            },
            SMALL: {"enabled": False, "pricePerHour": 0.08},
        }
    )
    nodes = [big("b1"), small("s1"), small("s2")]
    pods = pods_of("b1", "2100m", "2100m", "2100m") + pods_of("s1", "2200m") + pods_of("s2", "2200m")
    chosen = plan_for(nodes, pods, settings).replacement
    assert chosen is not None and chosen.step == "create"
    assert chosen.nodes == ("b1",) and chosen.new_nodes == 3
    assert chosen.savings_per_hour == pytest.approx(0.16)
    assert [ask.cpu_millis for ask in chosen.placeholder_requests] == [2100, 2100, 2100]
    # Two new nodes are as few as maxNewNodes allows: no replacement, and the note says the pods found no room.
    settings_two = make_config(
        pools={
            BIG: {"pricePerHour": 0.40, "minNodes": 0, "replacement": {"enabled": True, "targetPools": [SMALL]}},
            SMALL: {"enabled": False, "pricePerHour": 0.08},
        }
    )
    plan = plan_for(nodes, pods, settings_two)
    assert plan.replacement is None
    assert "not replaced by 1 to 2 new node(s) of a node of small-pool" in (node_report(plan, "b1").replacement or "")


def test_the_table_and_the_json_report_name_every_placeholder_and_the_new_nodes() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is not None
    text = " ".join(report.to_table(plan).split())
    first, second = plan.replacement.placeholders
    assert f"Node replacement (create, {first}, {second}): b1 -> 2 new node(s) of pool {SMALL}." in text
    document = report.to_dict(plan)["replacement"]
    assert document["placeholders"] == [first, second] and document["newNodes"] == 2
    assert document["target"] == document["targetPool"] == SMALL


def test_max_new_nodes_1_keeps_the_replacement_to_one_new_node_and_says_why_none_is_made() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    plan = plan_for(nodes, pods, config(maxNewNodes=1))
    assert plan.replacement is None
    assert "need 2 new nodes of it, more than maxNewNodes (1)" in (node_report(plan, "b1").replacement or "")


def test_the_second_new_node_is_not_asked_for_when_its_price_takes_the_saving_below_min_savings_percent() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    plan = plan_for(nodes, pods, config(minSavingsPercent=40))  # two small nodes save 35%
    assert plan.replacement is None
    assert "below minSavingsPercent (40%)" in (node_report(plan, "b1").replacement or "")


def test_each_placeholder_repels_its_siblings_and_carries_the_replacement_id() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    chosen = plan_for(nodes, pods, config()).replacement
    assert chosen is not None
    bodies = [placeholders.manifest(chosen, NAMESPACE, NOW, index) for index in range(chosen.new_nodes)]
    assert [body["metadata"]["name"] for body in bodies] == list(chosen.placeholders)
    for body in bodies:
        assert body["metadata"]["labels"][REPLACEMENT_LABEL] == chosen.replacement_id
        term = body["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term == {
            "labelSelector": {"matchLabels": {REPLACEMENT_LABEL: chosen.replacement_id}},
            "topologyKey": "kubernetes.io/hostname",
        }
        assert body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "3600m"


def test_one_new_node_keeps_the_single_placeholder_form() -> None:
    nodes = [big("b1"), small()]
    pods = pods_of("b1", "1800m", "1800m") + pods_of("s1", "4")
    chosen = plan_for(nodes, pods, config()).replacement
    assert chosen is not None and chosen.new_nodes == 1
    assert chosen.placeholders == (search.placeholder_name(["b1"], SMALL),)
    body = placeholders.manifest(chosen, NAMESPACE, NOW)
    assert "podAntiAffinity" not in body["spec"]["affinity"]


def test_a_placeholder_is_kept_off_the_nodes_its_selector_matches_now() -> None:
    # s1's free room is in the proof already: a placeholder that landed there would take it twice.
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    chosen = plan_for(nodes, pods, config()).replacement
    assert chosen is not None and chosen.avoid_nodes == ("s1",)
    body = placeholders.manifest(chosen, NAMESPACE, NOW, 1)
    terms = body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["s1"]}]}
        ]
    }


# -- rule 8 with prices: one ranking for deletions and replacements ---------------------------------------------


def a_deletion_beside(crowd: int) -> tuple[list[Node], list[Pod]]:
    """b1 as above, its pods memory-heavy (6 GiB each); b9 can simply be deleted: `crowd` pods holding 28 GiB
    move to n9 (1 cpu, 32 GiB), and b9 itself keeps too little memory free for b1's pods."""
    nodes = [big("b1"), small(), big("b9", marked_since=LONG_AGO)]
    nodes.append(make_node("n9", cpu="1", memory="32Gi", pool=SMALL, zone=ZONE, marked_since=None))
    pods = pods_of("b1", "1800m", "1800m", "1800m", "1800m", memory="6Gi") + pods_of("s1", "4")
    pods += pods_of("b9", *["10m"] * crowd, memory=f"{28 * 1024 // crowd}Mi")
    return nodes, pods


def test_a_deletion_that_saves_more_per_disrupted_pod_wins_over_a_replacement() -> None:
    # Deleting b9 saves 0.40/h for its 8 pods (0.05/h a pod); replacing b1 (4 pods) by two small nodes saves
    # 0.14/h (0.035/h a pod).
    plan = plan_for(*a_deletion_beside(8), config())
    assert plan.decision.action == "drain" and plan.decision.node == "b9"
    assert plan.replacement is None
    note = node_report(plan, "b1").replacement or ""
    # One new node would save 0.0675/h a pod, but b1's pods do not fit with it; two save less than the deletion.
    assert "fits on no other node" in note
    assert "with 2 new nodes it saves 0.0350/h a disrupted pod, and this run's deletion saves 0.0500/h a pod" in note


def test_a_deletion_that_saves_less_per_pod_gives_way_to_the_replacement() -> None:
    # b9 carries 40 pods: its deletion saves 0.01/h a pod.
    plan = plan_for(*a_deletion_beside(40), config())
    assert plan.decision.action == "none"
    assert plan.replacement is not None and plan.replacement.nodes == ("b1",) and plan.replacement.new_nodes == 2
    assert any("saves more per disrupted pod" in text for text in node_report(plan, "b9").blockers)


def test_with_ranking_disruption_a_deletion_always_comes_first() -> None:
    settings = config().model_copy(update={"ranking": "disruption"})
    plan = plan_for(*a_deletion_beside(40), settings)
    assert plan.decision.action == "drain" and plan.decision.node == "b9"
    assert plan.replacement is None


# -- machine types GKE creates pools for, and Spot ----------------------------------------------------------


def machine_config(*, spot: bool = False, **more: Any) -> Config:
    return config(targets=(), machineTypes=["e2-standard-4", "e2-standard-8"], spot=spot, **more)


def test_machine_types_are_not_used_where_the_cluster_does_not_create_pools() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    for creates, why in ((None, "GKE's cluster config was not read"), (False, "node auto-provisioning is off")):
        plan = plan_for(nodes, pods, machine_config(), creates_pools=creates)
        assert plan.replacement is None
        unused = "machineTypes (e2-standard-4, e2-standard-8) not used"
        assert any(unused in text and why in text for text in plan.price_warnings)


def test_the_cheapest_machine_type_that_fits_wins_and_the_placeholders_select_it() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    plan = plan_for(nodes, pods, machine_config(), creates_pools=True)
    chosen = plan.replacement
    assert chosen is not None
    # One e2-standard-8 (7.91 cpu allocatable) holds the four 1.8-cpu pods; two e2-standard-4 cost the same
    # and disrupt as many pods: the ranking's tie goes to fewer new nodes.
    assert (chosen.target_pool, chosen.new_nodes) == ("e2-standard-8", 1)
    assert chosen.machine_type_target
    assert dict(chosen.node_selector) == {
        "cloud.google.com/machine-family": "e2",
        "node.kubernetes.io/instance-type": "e2-standard-8",
        "topology.kubernetes.io/zone": ZONE,
    }
    assert "of a pool GKE creates" in chosen.reason


def test_spot_takes_only_the_pods_that_tolerate_spot() -> None:
    nodes = [big("b1"), small()]
    tolerant = pods_of("b1", "1800m", "1800m", tolerations=(SPOT_TOLERATION,))
    pods = tolerant + pods_of("s1", "4")
    plan = plan_for(nodes, pods, machine_config(spot=True), creates_pools=True)
    chosen = plan.replacement
    assert chosen is not None and ("cloud.google.com/gke-spot", "true") in chosen.node_selector
    assert [(taint.key, taint.effect) for taint in chosen.taints] == [("cloud.google.com/gke-spot", "NoSchedule")]
    # The same pods without the toleration go to on-demand capacity only.
    intolerant = pods_of("b1", "1800m", "1800m") + pods_of("s1", "4")
    chosen = plan_for(nodes, intolerant, machine_config(spot=True), creates_pools=True).replacement
    assert chosen is not None and ("cloud.google.com/gke-spot", "true") not in chosen.node_selector


# -- a replacement by several new nodes under way ----------------------------------------------------------


def held(name: str, replaces: tuple[str, ...], *, node: str | None = None, created: float = 60) -> Pod:
    """A placeholder of replacement r1 (one of several new nodes)."""
    return make_placeholder(name, replaces, node=node, created=created, cpu="3", replacement="r1")


def two_placeholders() -> tuple[list[Node], list[Pod], tuple[str, str]]:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    names = (search.placeholder_name(["b1"], SMALL), search.placeholder_name(["b1"], SMALL, 1))
    nodes[0] = big("b1", annotations={REPLACED_BY: ",".join(names)})
    return nodes, pods, names


def test_the_drain_waits_until_every_placeholder_runs_on_a_ready_node() -> None:
    nodes, pods, names = two_placeholders()
    nodes += [small("s2"), small("s3")]
    one_up = (held(names[0], ("b1",), node="s2"), held(names[1], ("b1",)))
    plan = plan_for(nodes, pods, config(), held=one_up)
    assert plan.replacement is not None and plan.replacement.step == "wait"
    assert names[1] in plan.replacement.reason and plan.decision.action == "none"
    both_up = (held(names[0], ("b1",), node="s2"), held(names[1], ("b1",), node="s3"))
    plan = plan_for(nodes, pods, config(), held=both_up)
    assert plan.replacement is not None and plan.replacement.step == "drain"
    assert plan.replacement.placeholders == names


def test_a_partial_arrival_at_the_timeout_gives_the_whole_replacement_up() -> None:
    nodes, pods, names = two_placeholders()
    nodes.append(small("s2"))
    late = (held(names[0], ("b1",), node="s2", created=901), held(names[1], ("b1",), created=901))
    plan = plan_for(nodes, pods, config(), held=late)
    chosen = plan.replacement
    assert chosen is not None and chosen.step == "give-up" and chosen.failed == ("b1",)
    assert chosen.placeholders == names  # both go
    assert names[1] in chosen.reason and "timeoutSeconds" in chosen.reason


def test_a_placeholder_gone_before_the_drain_gives_the_replacement_up() -> None:
    # A person deleted it, or a run stopped between the two creations.
    nodes, pods, names = two_placeholders()
    plan = plan_for(nodes, pods, config(), held=(held(names[0], ("b1",)),))
    chosen = plan.replacement
    assert chosen is not None and chosen.step == "give-up" and chosen.failed == ("b1",)
    assert f"{names[1]} is gone before any replaced node was drained" in chosen.reason


def test_a_placeholder_preempted_once_the_drain_started_does_not_stop_it() -> None:
    nodes, pods, names = two_placeholders()
    nodes[0] = big("b1", annotations={REPLACED_BY: ",".join(names), DRAIN_STARTED_AT: stamp(ago(30))})
    nodes[0] = msgspec.structs.replace(nodes[0], unschedulable=True)
    nodes.append(small("s2"))
    plan = plan_for(nodes, pods, config(), held=(held(names[0], ("b1",), node="s2"),))
    assert plan.replacement is None or plan.replacement.step != "give-up"


def test_a_replaced_by_with_one_name_as_before_is_read_and_adopted() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    name = search.placeholder_name(["b1"], SMALL)
    nodes[0] = big("b1", annotations={REPLACED_BY: name})
    nodes.append(small("s2"))
    old = make_placeholder(name, ("b1",), node="s2", cpu="3")  # no replacement id: made before several new nodes
    plan = plan_for(nodes, pods, config(), held=(old,))
    assert plan.replacement is not None and plan.replacement.step == "drain"
    assert plan.replacement.placeholders == (name,) and plan.placeholders_remove == ()


# -- hostile configuration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replacement", "problem"),
    [
        pytest.param({"maxNewNodes": 0}, "maxNewNodes", id="max-new-nodes-0"),
        pytest.param({"maxNewNodes": 11}, "maxNewNodes", id="max-new-nodes-11"),
        pytest.param({"machineTypes": ["E2 standard 4"]}, "not a Compute Engine machine type name", id="bad-name"),
        pytest.param({"machineTypes": ["e2-standard-4", "e2-standard-4"]}, "named more than once", id="twice"),
        pytest.param({"targetPools": []}, "targetPools or machineTypes", id="no-target"),
        pytest.param({"spot": "yes"}, "spot", id="spot-not-bool"),
    ],
)
def test_a_bad_replacement_setting_is_an_error_naming_it(replacement: dict[str, Any], problem: str) -> None:
    settings = {"enabled": True, "targetPools": [SMALL], **replacement}
    pool = {"enabled": True, "scaleDownCPURequestRatioLimit": 0.5, "replacement": settings}
    with pytest.raises(ConfigError) as raised:
        parse(json.dumps({"nodePools": {BIG: pool}}), source="test")
    assert any(problem in text for text in raised.value.problems), raised.value.problems


def test_an_unknown_machine_type_is_a_warning_and_not_used() -> None:
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    settings = config(targets=(), machineTypes=["zz9-standard-4"])
    plan = plan_for(nodes, pods, settings, creates_pools=True)
    assert plan.replacement is None
    assert any("machine type zz9-standard-4 has no known allocatable" in text for text in plan.price_warnings)


def test_a_machine_type_that_comes_with_gpus_is_a_warning_and_never_a_new_node() -> None:
    # A new node of cpu and memory alone would leave out the GPUs its price includes (and GKE keeps pods that do
    # not ask for GPUs off such nodes): node replacement makes none, though the machine type has a price.
    nodes, pods = a_busy_big_node_whose_pods_need_two_small_ones()
    settings = config(targets=(), machineTypes=["g2-standard-8", "a2-highgpu-1g"])
    plan = plan_for(nodes, pods, settings, creates_pools=True)
    assert plan.replacement is None
    for machine_type, gpus in (("g2-standard-8", "1 x nvidia-l4"), ("a2-highgpu-1g", "1 x nvidia-tesla-a100")):
        warning = f"machine type {machine_type} comes with GPUs ({gpus}), which node replacement does not model"
        assert any(warning in text for text in plan.price_warnings), plan.price_warnings


def test_a_target_pool_of_gpu_nodes_is_copied_from_its_node_gpus_taint_and_price_included() -> None:
    gpu_taint = Taint("nvidia.com/gpu", "present", "NoSchedule")
    labels = {"node.kubernetes.io/instance-type": "g2-standard-4", "cloud.google.com/gke-accelerator": "nvidia-l4"}
    gpus = {"nvidia.com/gpu": "1"}
    node = make_node("g1", pool="gpu-pool", zone=ZONE, labels=labels, extended=gpus, taints=[gpu_taint])
    view = ClusterView(Snapshot((node,), ()), make_config())
    made = templates.template(view, pricing.BUILT_IN, "gpu-pool", ZONE, Resources(0, 0))
    assert not isinstance(made, str), made
    assert made.node.allocatable.extended == (("nvidia.com/gpu", 1000),)
    assert made.node.taints == (gpu_taint,)
    # g2-standard-4's `hour` in europe-west1 in pricing.yml of Cyclenerd/google-cloud-pricing-cost-calculator at
    # commit fd66b26ff84fee5cdd94f341ea89206e76c06b99 (the built-in table's source), its L4 included.
    assert made.price.per_hour == pytest.approx(0.778293004, abs=1e-6)


def test_a_target_pool_of_gpu_machines_with_no_node_to_copy_is_not_used() -> None:
    empty = PoolAutoscaling(enabled=True, max_node_count=3, machine_type="g2-standard-4", locations=(ZONE,))
    snapshot = Snapshot((), (), pool_autoscaling={"gpu-pool": empty})
    made = templates.template(ClusterView(snapshot, make_config()), pricing.BUILT_IN, "gpu-pool", ZONE, Resources(0, 0))
    assert made == (
        "target pool gpu-pool: machine type g2-standard-4 comes with GPUs (1 x nvidia-l4), which node replacement "
        "does not model on a new node (a pool with a node is copied from it)"
    )


def test_a_machine_type_s_new_node_is_taken_a_margin_below_gke_s_formula_so_its_placeholder_fits() -> None:
    # A node reports within a few percent of GKE's published reservations: a placeholder asking for the formula's
    # full allocatable might fit on no real node of the type, and the replacement would only wait and give up.
    # b1's four 1.95-cpu pods (7.8 cpu) go to one e2-standard-8 and s1's 2 free cpu: the ask is capped.
    nodes = [big("b1"), small()]
    pods = pods_of("b1", "1950m", "1950m", "1950m", "1950m") + pods_of("s1", "2")
    settings = config(targets=(), machineTypes=["e2-standard-8"])
    chosen = plan_for(nodes, pods, settings, creates_pools=True).replacement
    assert chosen is not None and (chosen.target_pool, chosen.new_nodes) == ("e2-standard-8", 1)
    cpu, _ = machines.allocatable_amounts("e2-standard-8")
    (ask,) = chosen.placeholder_requests
    assert ask.cpu_millis == cpu * (100 - templates.FORMULA_MARGIN_PERCENT) // 100 < 7800


def test_a_set_whose_pods_that_cannot_use_spot_have_no_room_elsewhere_is_not_proven() -> None:
    # b1's pods tolerate nothing; the Spot machine type's nodes are tainted, and s1 is full: no count of Spot nodes
    # helps, and the search says so without spending a proof on it.
    nodes = [big("b1"), small()]
    pods = pods_of("b1", "1800m", "1800m") + pods_of("s1", "4")
    settings = config(targets=(), machineTypes=["e2-standard-4"], spot=True, minSavingsPercent=70)  # Spot only
    plan = plan_for(nodes, pods, settings, creates_pools=True)
    assert plan.replacement is None
    note = node_report(plan, "b1").replacement or ""
    expected = "its 2 pod(s) that cannot run on it (cpu 3600m, memory 2048Mi) need more than the other nodes have free"
    assert expected in note


PINNED = (("cloud.google.com/gke-nodepool", BIG),)


def nodes_with_pinned_pods_that_fit_nowhere() -> tuple[list[Node], list[Pod]]:
    """b1-b5 each hold one 7-cpu pod pinned to big-pool (1 cpu free on each); b6 three 2-cpu pods (2 free); s1 is
    full; o1-o4, of a pool node-compactor leaves alone, are empty. The pinned pods cannot use a small node and fit
    on no other node, though the other nodes' free cpu summed (32 and more) would hold them; b6's pods fit on the
    empty nodes beside one new small node."""
    nodes = [big(f"b{index}") for index in range(1, 7)] + [small()]
    nodes += [make_node(f"o{index}", cpu="8", memory="32Gi", pool="other-pool", zone=ZONE) for index in range(1, 5)]
    pods = [pod for index in range(1, 6) for pod in pods_of(f"b{index}", "7", node_selector=PINNED)]
    pods += pods_of("b6", "2", "2", "2") + pods_of("s1", "4")
    return nodes, pods


def test_a_set_with_a_pod_that_cannot_use_the_target_and_fits_on_no_node_spends_no_proof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proven: list[list[str]] = []
    prove = search._prove

    def counted(bigger: ClusterView, group: list[Any], *args: Any) -> Any:
        proven.append([state.name for state in group])
        return prove(bigger, group, *args)

    monkeypatch.setattr(search, "_prove", counted)
    nodes, pods = nodes_with_pinned_pods_that_fit_nowhere()
    plan = plan_for(nodes, pods, config())
    assert not any(name in group for group in proven for name in ("b1", "b2", "b3", "b4", "b5"))
    # The pinned pods' own nodes hold 2 cpu free at most, less than any of them asks for; alone, each fits on no
    # node either.
    note = node_report(plan, "b1").replacement or ""
    assert "pod(s) like default/b" in note and "cannot run on it and may use only" in note
    nowhere = search.Elsewhere(ClusterView(Snapshot(tuple(nodes), tuple(pods)), config()))
    assert not nowhere.fits_outside(next(pod for pod in pods if pod.name == "b1-p0"), frozenset({"b1"}))


def test_sets_that_cannot_fit_do_not_spend_the_proofs_a_set_further_down_needs() -> None:
    # The 25 sets of b1-b5 (one pod a node: the most saved per disrupted pod) rank before b6 (three pods); proven
    # one by one they spent the run's 12 proofs and b6 was never tried.
    nodes, pods = nodes_with_pinned_pods_that_fit_nowhere()
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is not None
    assert plan.replacement.nodes == ("b6",)
    assert plan.replacement.new_nodes == 1


def test_pods_that_cannot_use_spot_need_room_together_on_the_nodes_they_may_use() -> None:
    # b1's two 800m pods tolerate nothing: only s1 (1 cpu free) may take them, which holds either but not both;
    # the Spot node beside it is empty, and the other nodes' free cpu summed (9 cpu) would be room enough.
    spot_node = make_node(
        "spot1",
        cpu="8",
        memory="32Gi",
        pool="spot-pool",
        zone=ZONE,
        marked_since=None,
        labels={"cloud.google.com/gke-spot": "true"},
        taints=(Taint("cloud.google.com/gke-spot", "true", "NoSchedule"),),
    )
    nodes = [big("b1"), small(), spot_node]
    pods = pods_of("b1", "800m", "800m") + pods_of("s1", "3")
    settings = config(targets=(), machineTypes=["e2-standard-4"], spot=True, minSavingsPercent=70)
    plan = plan_for(nodes, pods, settings, creates_pools=True)
    assert plan.replacement is None
    note = node_report(plan, "b1").replacement or ""
    assert "its 2 pod(s) like default/b1-p0 cannot run on it and may use only 1 other node(s)" in note


def test_candidates_the_search_leaves_out_keep_replaceable_since() -> None:
    # Seven busy candidates whose pods could each go to a small node; b7 holds two pods (the least saved per
    # disrupted pod) and ranks after the six the search combines: it was not judged, so its `replaceable-since`
    # stays, and the note says why it was not tried.
    nodes = [big(f"b{index}") for index in range(1, 8)] + [small()]
    pods = [pod for index in range(1, 7) for pod in pods_of(f"b{index}", "3")]
    pods += pods_of("b7", "1500m", "1500m") + pods_of("s1", "4")
    plan = plan_for(nodes, pods, config())
    assert "ranks after them" in (node_report(plan, "b7").replacement or "")
    assert "b7" not in plan.replaceable_remove
    assert plan.replacement is not None and "b7" not in plan.replacement.nodes


def test_a_candidate_ruled_out_alone_gives_its_place_to_the_next() -> None:
    # b1-b6 each hold a 7-cpu pod pinned to big-pool that fits on no other node: no set holding one of them can be
    # replaced, so they take none of the six places, and b7 (two pods, the least saved per disrupted pod, seventh)
    # is combined and replaced. They are judged (their `replaceable-since` comes off) with the reason.
    nodes = [big(f"b{index}") for index in range(1, 8)] + [small()]
    pods = [pod for index in range(1, 7) for pod in pods_of(f"b{index}", "7", node_selector=PINNED)]
    pods += pods_of("b7", "1500m", "1500m") + pods_of("s1", "4")
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is not None and plan.replacement.nodes == ("b7",)
    assert set(plan.replaceable_remove) == {f"b{index}" for index in range(1, 7)}
    assert "fits on no other node even as the cluster is now" in (node_report(plan, "b1").replacement or "")


def test_a_pod_fits_outside_a_set_only_on_a_node_of_its_own_terms_with_room_now() -> None:
    nodes = [big(f"b{index}") for index in range(1, 4)] + [small("s1"), small("s2")]
    pods = pods_of("b1", "7", node_selector=PINNED) + pods_of("b2", "5") + pods_of("b3", "2") + pods_of("s1", "1")
    elsewhere = search.Elsewhere(ClusterView(Snapshot(tuple(nodes), tuple(pods)), config()))
    pinned = make_pod("x", node="b1", cpu="3", node_selector=PINNED)
    # b2 (3 cpu free) takes it; s1 and s2 have room but are not big-pool; b3 has 6 cpu free.
    assert elsewhere.fits_outside(pinned, frozenset({"b1"}))
    assert elsewhere.fits_outside(pinned, frozenset({"b1", "b3"}))
    assert not elsewhere.fits_outside(pinned, frozenset({"b2", "b3"}))
    loose = make_pod("y", node="b1", cpu="1")
    # Five nodes take it: a set of four leaves one; the look-up stops at `ENOUGH` nodes either way.
    assert elsewhere.fits_outside(loose, frozenset({"b1", "b2", "b3", "s1"}))
    assert not elsewhere.fits_outside(loose, frozenset({"b1", "b2", "b3", "s1", "s2"}))
