"""Node replacement against the fake API server: the placeholder asked for, waited for, given up, adopted,
and the drain onto the new node (DESIGN "Node replacement").

The test plays the Cluster Autoscaler (it adds the node) and kube-scheduler's preemption (it binds the
placeholder, then removes it for the evicted pods' replacements): the fake schedules no created pod. The
real control plane does both in tests/e2e/test_replacement.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.core.model import (
    CREATED_AT,
    DRAIN_STARTED_AT,
    PLACEHOLDER_LABEL,
    PLACEHOLDER_PRIORITY_CLASS,
    REPLACEABLE_SINCE,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    REPLACES,
    UNDERUTILIZED_SINCE,
)
from compactor.errors import RunFailedError
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import (
    MARKED,
    POOL_CONFIG,
    env_with,
    event_reasons,
    later,
    node_annotations,
    run_once,
)

NAMESPACE = "node-compactor"
BIG, SMALL = "big-pool", "small-pool"
CONFIG: dict[str, Any] = {
    "nodePools": {
        BIG: {
            **POOL_CONFIG,
            "pricePerHour": 0.40,
            "replacement": {"enabled": True, "targetPools": [SMALL], "timeoutSeconds": 600},
        },
        SMALL: {"pricePerHour": 0.13},
    }
}


def cluster(api: FakeApiServer) -> None:
    """b1 and b2 (8 cpu) hold 4.8 cpu each in 1.2-cpu pods: neither takes all of the other's. s1 (4 cpu) has 2 free."""
    for name, marked in (("b1", MARKED), ("b2", None)):
        # b1 has waited rule 10's neededMarkedTimeSeconds as a replaceable node too.
        annotations = {UNDERUTILIZED_SINCE: marked, REPLACEABLE_SINCE: marked} if marked else {}
        api.add(k8s.node(name, cpu="8", memory="32Gi", pool=BIG, machine_type="n2-standard-8", annotations=annotations))
        for index in range(4):
            api.add(k8s.pod(f"web{name[-1]}-{index}", node=name, cpu="1200m", memory="1Gi"))
    api.add(k8s.node("s1", pool=SMALL))
    api.add(k8s.pod("small-0", node="s1", cpu="2"))


def placeholders(api: FakeApiServer) -> list[dict[str, Any]]:
    return [
        pod
        for pod in api.objects("Pod", NAMESPACE)
        if (pod["metadata"].get("labels") or {}).get(PLACEHOLDER_LABEL) == "true"
    ]


def the_autoscaler_adds_a_node_and_the_placeholder_runs_there(api: FakeApiServer, node: str = "s2") -> None:
    (placeholder,) = placeholders(api)
    runs_on(api, placeholder, node)


def runs_on(api: FakeApiServer, placeholder: dict[str, Any], node: str) -> None:
    """The test plays the Cluster Autoscaler (a node for the placeholder) and kube-scheduler (binding it)."""
    api.add(k8s.node(node, pool=SMALL, created="2026-11-21T11:59:00Z"))
    placeholder["spec"]["nodeName"] = node
    placeholder["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    api.add(placeholder)


def test_a_replacement_asks_for_the_node_waits_drains_onto_it_and_deletes_the_placeholder(
    api: FakeApiServer,
) -> None:
    cluster(api)
    first = run_once(api, env=env_with(CONFIG))
    report = first.report
    assert report["replacement"]["step"] == "create"
    assert report["replacement"]["nodes"] == ["b1"]
    assert report["replacement"]["savingsPerHour"] == pytest.approx(0.27)
    # DESIGN's fields: the target, how many new nodes, whether they are Spot.
    assert report["replacement"]["target"] == SMALL == report["replacement"]["targetPool"]
    assert report["replacement"]["newNodes"] == 1
    assert report["replacement"]["spot"] is False
    (placeholder,) = placeholders(api)
    name = placeholder["metadata"]["name"]
    assert node_annotations(api, "b1")[REPLACED_BY] == name
    assert placeholder["metadata"]["annotations"][REPLACES] == "b1"
    assert CREATED_AT in placeholder["metadata"]["annotations"]
    spec = placeholder["spec"]
    assert spec["priorityClassName"] == PLACEHOLDER_PRIORITY_CLASS
    assert spec["terminationGracePeriodSeconds"] == 0
    assert spec["nodeSelector"] == {
        "cloud.google.com/gke-nodepool": SMALL,
        "topology.kubernetes.io/zone": "europe-west1-b",
    }
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == "4000m"  # 4.8 cpu capped at s1's 4
    assert api.evictions == []

    waiting = run_once(api, at=later(60), env=env_with(CONFIG))
    assert waiting.report["replacement"]["step"] == "wait"
    assert waiting.report["replacement"]["spot"] is False  # read back from the placeholder's nodeSelector
    assert waiting.report["decision"]["action"] == "none"
    assert api.evictions == []

    the_autoscaler_adds_a_node_and_the_placeholder_runs_there(api)
    draining = run_once(api, at=later(120), env=env_with(CONFIG))
    assert draining.report["decision"]["action"] == "drain"
    assert draining.report["decision"]["node"] == "b1"
    assert draining.report["decision"]["savingsPerHour"] == pytest.approx(0.40)
    assert DRAIN_STARTED_AT in node_annotations(api, "b1")
    assert api.evictions  # the first batch went; the rest waits for room (the fake does not preempt)

    # kube-scheduler preempts the placeholder for the evicted pods' replacements.
    api.delete("Pod", name, NAMESPACE)
    api.schedule_pending()
    for offset in (180, 240, 300):
        run_once(api, at=later(offset), env=env_with(CONFIG))
        api.schedule_pending()
    assert not any(pod["spec"].get("nodeName") == "b1" for pod in api.objects("Pod", "default"))
    assert REPLACED_BY not in node_annotations(api, "b1")  # its placeholder is gone: the pointer is removed
    assert all(pod["spec"].get("nodeName") for pod in api.objects("Pod", "default"))


def test_a_placeholder_that_never_runs_is_deleted_at_its_timeout_and_nothing_is_drained(api: FakeApiServer) -> None:
    cluster(api)
    run_once(api, env=env_with(CONFIG))
    assert len(placeholders(api)) == 1
    result = run_once(api, at=later(601), env=env_with(CONFIG))
    assert result.report["replacement"]["step"] == "give-up"
    assert placeholders(api) == []
    annotations = node_annotations(api, "b1")
    assert REPLACED_BY not in annotations
    assert REPLACEMENT_FAILED_AT in annotations
    assert api.evictions == []
    assert any(
        event.get("reason") == "NodeCompactorReplacementFailed" and event.get("type") == "Warning"
        for event in api.objects("Event", "default")
    )
    # Backing off: b1 is not replaced again (b2, marked long enough by now, may be).
    again = run_once(api, at=later(660), env=env_with(CONFIG))
    assert "b1" not in again.report.get("replacement", {}).get("nodes", [])
    assert (
        "its replacement failed" in next(node for node in again.report["nodes"] if node["name"] == "b1")["replacement"]
    )


def test_a_run_that_fails_creating_the_placeholder_leaves_no_pointer_and_the_next_run_asks_again(
    api: FakeApiServer,
) -> None:
    cluster(api)
    api.add_fault(Fault(method="POST", path_regex=f"/namespaces/{NAMESPACE}/pods$", status=403, times=1))
    with pytest.raises(RunFailedError):
        run_once(api, env=env_with(CONFIG))
    assert placeholders(api) == []
    assert REPLACED_BY not in node_annotations(api, "b1"), "the nodes point only at placeholders that exist"
    run_once(api, at=later(60), env=env_with(CONFIG))
    assert len(placeholders(api)) == 1
    assert node_annotations(api, "b1")[REPLACED_BY] == placeholders(api)[0]["metadata"]["name"]


def test_a_create_whose_answer_was_lost_is_adopted(api: FakeApiServer) -> None:
    cluster(api)
    api.add_fault(
        Fault(method="POST", path_regex=f"/namespaces/{NAMESPACE}/pods$", drop_connection=True, applied=True, times=1)
    )
    result = run_once(api, env=env_with(CONFIG))
    assert len(placeholders(api)) == 1
    assert result.report["outcome"]["placeholdersCreated"] == [placeholders(api)[0]["metadata"]["name"]]


def test_a_placeholder_deleted_before_the_drain_gives_the_replacement_up(api: FakeApiServer) -> None:
    cluster(api)
    run_once(api, env=env_with(CONFIG))
    the_autoscaler_adds_a_node_and_the_placeholder_runs_there(api)
    (placeholder,) = placeholders(api)
    api.delete("Pod", placeholder["metadata"]["name"], NAMESPACE)  # a person deleted it, or a pod preempted it
    result = run_once(api, at=later(120), env=env_with(CONFIG))
    assert result.report["replacement"]["step"] == "give-up"
    assert "is gone before any replaced node was drained" in result.report["replacement"]["reason"]
    annotations = node_annotations(api, "b1")
    assert REPLACED_BY not in annotations and REPLACEMENT_FAILED_AT in annotations
    assert "NodeCompactorReplacementFailed" in event_reasons(api, "b1")


def test_an_orphan_placeholder_is_deleted(api: FakeApiServer) -> None:
    cluster(api)
    orphan = k8s.pod("node-compactor-placeholder-0123456789", namespace=NAMESPACE, owner_kind=None, phase="Pending")
    orphan["metadata"]["labels"] = {PLACEHOLDER_LABEL: "true"}
    orphan["metadata"]["annotations"] = {REPLACES: "gone-node", CREATED_AT: "2026-11-21T11:00:00Z"}
    api.add(orphan)
    result = run_once(api, env=env_with({"nodePools": {BIG: POOL_CONFIG}}))
    assert result.report["outcome"]["placeholdersDeleted"] == ["node-compactor-placeholder-0123456789"]
    assert placeholders(api) == []


def test_a_dry_run_reports_the_replacement_and_creates_nothing(api: FakeApiServer) -> None:
    cluster(api)
    result = run_once(api, env=env_with(CONFIG), dry_run=True)
    assert result.report["replacement"]["step"] == "create"
    assert placeholders(api) == []
    assert REPLACED_BY not in node_annotations(api, "b1")
    assert api.writes_of("Pod", "POST") == []


def a_busy_node_beside_a_small_one(api: FakeApiServer, *, replaceable_since: str | None) -> None:
    """b1 (8 cpu) holds 6.4 cpu in 1.6-cpu pods, above the 75% limit: never marked, never simply drained. s1 has 3.2
    cpu free: with one more small node b1's pods fit."""
    annotations = {REPLACEABLE_SINCE: replaceable_since} if replaceable_since else {}
    api.add(k8s.node("b1", cpu="8", memory="32Gi", pool=BIG, machine_type="n2-standard-8", annotations=annotations))
    for index in range(4):
        api.add(k8s.pod(f"web1-{index}", node="b1", cpu="1600m", memory="1Gi"))
    api.add(k8s.node("s1", pool=SMALL))
    api.add(k8s.pod("small-0", node="s1", cpu="800m"))


BUSY_CONFIG: dict[str, Any] = {
    "nodePools": {BIG: {**CONFIG["nodePools"][BIG], "minNodes": 0}, SMALL: CONFIG["nodePools"][SMALL]}
}


def test_a_busy_node_is_found_replaceable_then_replaced_after_the_wait(api: FakeApiServer) -> None:
    a_busy_node_beside_a_small_one(api, replaceable_since=None)
    first = run_once(api, env=env_with(BUSY_CONFIG))
    assert first.report["replaceable"] == {"add": ["b1"], "remove": []}
    assert first.report["outcome"]["replaceableAdded"] == ["b1"]
    assert node_annotations(api, "b1")[REPLACEABLE_SINCE] == "2026-11-21T12:00:00Z"
    assert UNDERUTILIZED_SINCE not in node_annotations(api, "b1")
    assert "Replaceable" in event_reasons(api, "b1")
    assert placeholders(api) == []

    early = run_once(api, at=later(240), env=env_with(BUSY_CONFIG))
    assert "replacement" not in early.report
    assert placeholders(api) == []

    after = run_once(api, at=later(300), env=env_with(BUSY_CONFIG))
    assert after.report["replacement"]["step"] == "create"
    assert after.report["replacement"]["nodes"] == ["b1"]
    assert len(placeholders(api)) == 1
    assert node_annotations(api, "b1")[REPLACEABLE_SINCE] == "2026-11-21T12:00:00Z"  # the first time is kept


def test_the_annotation_comes_off_when_no_replacement_saves_enough(api: FakeApiServer) -> None:
    a_busy_node_beside_a_small_one(api, replaceable_since=MARKED)
    stricter = {
        "nodePools": {
            BIG: {
                **BUSY_CONFIG["nodePools"][BIG],
                "replacement": {**CONFIG["nodePools"][BIG]["replacement"], "minSavingsPercent": 80},
            },
            SMALL: CONFIG["nodePools"][SMALL],
        }
    }
    result = run_once(api, env=env_with(stricter))
    assert result.report["replaceable"] == {"add": [], "remove": ["b1"]}
    assert REPLACEABLE_SINCE not in node_annotations(api, "b1")


def test_a_dry_run_writes_no_replaceable_annotation(api: FakeApiServer) -> None:
    a_busy_node_beside_a_small_one(api, replaceable_since=None)
    result = run_once(api, env=env_with(BUSY_CONFIG), dry_run=True)
    assert result.report["replaceable"]["add"] == ["b1"]
    assert REPLACEABLE_SINCE not in node_annotations(api, "b1")


def test_a_misspelt_target_pool_is_one_warning_in_the_run_and_nothing_is_asked_for(api: FakeApiServer) -> None:
    # b1's replacement is looked for (so the search meets the name too), and the run reports it once.
    cluster(api)
    typo = {**CONFIG, "nodePools": {**CONFIG["nodePools"], BIG: {**CONFIG["nodePools"][BIG]}}}
    typo["nodePools"][BIG]["replacement"] = {**CONFIG["nodePools"][BIG]["replacement"], "targetPools": ["smal-pool"]}
    result = run_once(api, env=env_with(typo))
    named = [warning for warning in result.report["warnings"] if "smal-pool" in warning]
    assert len(named) == 1
    assert named[0].startswith("target pool smal-pool has no node in the cluster")
    assert "the pools there are big-pool, small-pool" in named[0]
    assert "replacement" not in result.report
    assert placeholders(api) == []


def test_a_replacement_onto_spot_says_so_at_every_step(api: FakeApiServer) -> None:
    # small-pool made a Spot pool: its nodes carry the label, and b1's pods tolerate nothing more (no taint).
    for name in ("b1", "b2"):
        annotations = {UNDERUTILIZED_SINCE: MARKED, REPLACEABLE_SINCE: MARKED} if name == "b1" else {}
        api.add(k8s.node(name, cpu="8", memory="32Gi", pool=BIG, machine_type="n2-standard-8", annotations=annotations))
        for index in range(4):
            api.add(k8s.pod(f"web{name[-1]}-{index}", node=name, cpu="1200m", memory="1Gi"))
    api.add(k8s.node("s1", pool=SMALL, labels={"cloud.google.com/gke-spot": "true"}))
    api.add(k8s.pod("small-0", node="s1", cpu="2"))
    first = run_once(api, env=env_with(CONFIG))
    assert first.report["replacement"]["step"] == "create"
    assert first.report["replacement"]["spot"] is True
    (placeholder,) = placeholders(api)
    assert placeholder["spec"]["nodeSelector"]["cloud.google.com/gke-spot"] == "true"
    waiting = run_once(api, at=later(60), env=env_with(CONFIG))
    assert waiting.report["replacement"]["step"] == "wait"
    assert waiting.report["replacement"]["spot"] is True


# -- several new nodes ---------------------------------------------------------------------------------------


def busy_cluster(api: FakeApiServer) -> None:
    """b1 (8 cpu) holds four 1.8-cpu pods, 90% busy; s1 (4 cpu) is full. Two new small nodes take b1's pods."""
    annotations = {REPLACEABLE_SINCE: MARKED}
    api.add(k8s.node("b1", cpu="8", memory="32Gi", pool=BIG, machine_type="n2-standard-8", annotations=annotations))
    for index in range(4):
        api.add(k8s.pod(f"web-{index}", node="b1", cpu="1800m", memory="1Gi"))
    api.add(k8s.node("s1", pool=SMALL))
    api.add(k8s.pod("small-0", node="s1", cpu="4"))


def test_a_busy_node_asks_for_two_new_nodes_with_two_placeholders_and_drains_once_both_run(
    api: FakeApiServer,
) -> None:
    busy_cluster(api)
    first = run_once(api, env=env_with(BUSY_CONFIG))
    assert first.report["replacement"]["newNodes"] == 2
    made = placeholders(api)
    names = sorted(pod["metadata"]["name"] for pod in made)
    assert len(names) == 2 and sorted(first.report["replacement"]["placeholders"]) == names
    assert sorted(node_annotations(api, "b1")[REPLACED_BY].split(",")) == names
    ids = {pod["metadata"]["labels"]["node-compactor.dev/replacement"] for pod in made}
    assert len(ids) == 1, "one replacement id on both"
    runs_on(api, made[0], "s2")
    waiting = run_once(api, at=later(60), env=env_with(BUSY_CONFIG))
    assert waiting.report["replacement"]["step"] == "wait" and api.evictions == []
    (pending,) = [pod for pod in placeholders(api) if not pod["spec"].get("nodeName")]
    runs_on(api, pending, "s3")
    draining = run_once(api, at=later(120), env=env_with(BUSY_CONFIG))
    assert draining.report["decision"]["action"] == "drain" and draining.report["decision"]["node"] == "b1"


def test_one_of_two_placeholders_never_scheduled_gives_both_up_at_the_timeout(api: FakeApiServer) -> None:
    busy_cluster(api)
    run_once(api, env=env_with(BUSY_CONFIG))
    runs_on(api, placeholders(api)[0], "s2")
    result = run_once(api, at=later(601), env=env_with(BUSY_CONFIG))
    assert result.report["replacement"]["step"] == "give-up"
    assert placeholders(api) == [] and api.evictions == []
    assert REPLACEMENT_FAILED_AT in node_annotations(api, "b1")


def test_a_crash_between_the_two_creations_leaves_an_orphan_the_next_run_deletes(api: FakeApiServer) -> None:
    busy_cluster(api)
    # The second create fails: the run stops before any node points at the first placeholder.
    post = f"/namespaces/{NAMESPACE}/pods$"
    api.on_request("POST", post, lambda: api.add_fault(Fault(method="POST", path_regex=post, status=403, times=-1)))
    with pytest.raises(RunFailedError):
        run_once(api, env=env_with(BUSY_CONFIG))
    api.clear_faults()
    (orphan,) = [pod["metadata"]["name"] for pod in placeholders(api)]
    assert REPLACED_BY not in node_annotations(api, "b1")
    result = run_once(api, at=later(60), env=env_with(BUSY_CONFIG))
    assert result.report["outcome"]["placeholdersDeleted"] == [orphan]
    # The same run asks anew: the same names (a retried create is a 409, adopted), both there, both pointed at.
    assert sorted(pod["metadata"]["name"] for pod in placeholders(api)) == sorted(
        result.report["replacement"]["placeholders"]
    )
    assert len(node_annotations(api, "b1")[REPLACED_BY].split(",")) == 2


def test_machine_types_without_gke_are_a_warning_and_not_used(api: FakeApiServer) -> None:
    busy_cluster(api)
    config = {
        "nodePools": {
            BIG: {
                **POOL_CONFIG,
                "minNodes": 0,
                "pricePerHour": 0.40,
                "replacement": {"enabled": True, "machineTypes": ["e2-standard-4"]},
            }
        }
    }
    result = run_once(api, env=env_with(config))
    assert "replacement" not in result.report
    assert any("machineTypes (e2-standard-4) not used" in text for text in result.report["warnings"])
    assert placeholders(api) == []
