"""A snapshot that lists an object twice is refused, naming it; one name in two namespaces is two objects."""

from __future__ import annotations

import pytest

from compactor import integrity
from compactor.errors import SnapshotError
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
