"""bench/walk_orders.py: the ways of walking the nodes it compares with the Cluster Autoscaler's log."""

from bench import walk_orders
from compactor.simulation import autoscaler


def test_the_chunk_size_is_the_square_root_capped_by_the_nodes_per_goroutine() -> None:
    assert autoscaler.chunk_size(12, 4) == 3
    assert autoscaler.chunk_size(100, 4) == 10
    assert autoscaler.chunk_size(5, 4) == 2  # 5 // 4 + 1
    assert autoscaler.chunk_size(2, 4) == 1


def test_a_walk_from_one_past_the_last_match_visits_every_passing_node_in_turn() -> None:
    order = ["a", None, "b", None, "c", None]
    assert walk_orders.walk(order, 5, 4, walk_orders.first) == ["a", "b", "c", "a"]


def test_in_step_chunks_can_pass_over_a_node_that_takes_the_pod() -> None:
    # Chunks of 2 over [a, -, b, c]. One past a, the first step checks "-" and c: c is taken, and b,
    # the first passing node in order, is passed over.
    order = ["a", None, "b", "c"]
    assert walk_orders.walk(order, 3, 3, walk_orders.ways(4)["chunks"]) == ["a", "c", "a"]
    assert walk_orders.walk(order, 3, 3, walk_orders.first) == ["a", "b", "c"]


def test_never_choosing_a_passing_node_is_impossible_for_the_first_match_and_possible_in_chunks() -> None:
    counted = walk_orders.count(["a", "b", "a", "b"], ["a", "b", "c"], 6, 4)
    assert counted["first"] == (0, 720)
    assert counted["chunks"][0] > 0
    assert counted["two-at-a-time"][0] > 0
    every_one = walk_orders.count(["a", "b", "c", "a"], ["a", "b", "c"], 6, 4)
    assert every_one["first"][0] > 0
