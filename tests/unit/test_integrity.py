"""A snapshot that lists an object twice is refused, naming it; one name in two namespaces is two objects."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.errors import SnapshotError
from compactor.kube import integrity
from tests.builders import make_node, make_pdb, make_pod, make_snapshot


def test_one_name_in_two_namespaces_is_two_objects() -> None:
    pods = [make_pod("redis-0", namespace="shop"), make_pod("redis-0", namespace="blog")]
    pdbs = [make_pdb("redis", namespace="shop", match={"app": "redis"}), make_pdb("redis", match={"app": "redis"})]
    snapshot = make_snapshot([make_node("n1")], pods, pdbs)
    assert integrity.check_unique(snapshot) is snapshot


def test_an_object_listed_twice_is_named() -> None:
    pods = [make_pod("redis-0", namespace="shop"), make_pod("redis-0", namespace="blog")] * 2
    pdbs = [make_pdb("redis", namespace="shop", match={"app": "redis"})] * 3
    snapshot = make_snapshot([make_node("n1"), make_node("n1")], pods, pdbs)
    with pytest.raises(SnapshotError) as raised:
        integrity.check_unique(snapshot)
    assert raised.value.message == "the cluster snapshot lists 4 object(s) more than once"
    assert raised.value.problems == [
        "Node n1 is listed 2 times",
        "Pod shop/redis-0 is listed 2 times",
        "Pod blog/redis-0 is listed 2 times",
        "PodDisruptionBudget shop/redis is listed 3 times",
    ]


def test_a_pod_repeated_in_list_order_is_named() -> None:
    """The API server's order (each namespace together, names ascending) is checked in one pass; a
    pod listed twice there, next to itself or in its namespace listed again later, is still named."""
    in_order = [make_pod("a-0", namespace="blog"), make_pod("a-1", namespace="blog"), make_pod("a-0", namespace="shop")]
    assert integrity.check_unique(make_snapshot([make_node("n1")], in_order, [])).pods == tuple(in_order)
    for pods in (
        [*in_order[:2], in_order[1], in_order[2]],  # next to itself
        [*in_order, make_pod("a-1", namespace="blog")],  # its namespace again, after another
    ):
        with pytest.raises(SnapshotError) as raised:
            integrity.check_unique(make_snapshot([make_node("n1")], pods, []))
        assert raised.value.problems == ["Pod blog/a-1 is listed 2 times"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "a-b", "b"]), st.sampled_from(["p", "p-0", "q"])), max_size=8))
def test_pods_in_any_order_are_refused_exactly_when_one_repeats(keys: list[tuple[str, str]]) -> None:
    pods = [make_pod(name, namespace=namespace) for namespace, name in keys]
    snapshot = make_snapshot([make_node("n1")], pods, [])
    if len(set(keys)) == len(keys):
        assert integrity.check_unique(snapshot) is snapshot
    else:
        with pytest.raises(SnapshotError):
            integrity.check_unique(snapshot)
