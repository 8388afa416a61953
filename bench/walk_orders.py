"""Which ways of walking the nodes can give the placements the Cluster Autoscaler logged.

The autoscaler's removal simulation puts each pod of a node on a node that passes kube-scheduler's
filters, searching its snapshot's node list from one past the last match. This counts, over every
order of the list and every starting place, how often each way of searching gives the sequence of
nodes a log showed (`Pod … can be moved to …`, at `--v=4`) for one node's pods:

- `first`: the first passing node in order;
- `chunks`: the search split into chunks of about the square root of the node count, one goroutine
  each (`--predicate-parallelism`, 4), all in step, the earliest match of the first step that finds
  one taken (the first match cancels the rest);
- `two-at-a-time`: the same with two chunks in step at a time, as on a 2-core machine.

Only which nodes pass matters here: every node in `--passing` takes each pod, the others none.
A count of 0 means that way of searching cannot give what was logged.

    python bench/walk_orders.py --seen 03,04,00,01,07,03,04 --passing 00,01,02,03,04,07 --nodes 10
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Callable, Sequence

Pick = Callable[[Callable[[int], bool], int, int], int | None]


def chunk_size(nodes: int, parallelism: int) -> int:
    """The chunk size `RunFiltersUntilPassingNode` gives `ParallelizeUntil` (predicate/plugin_runner.go)."""
    size = int(math.sqrt(nodes))
    cap = nodes // parallelism + 1
    return cap if size > cap else max(size, 1)


def first(passes: Callable[[int], bool], nodes: int, size: int) -> int | None:
    return next((step for step in range(nodes) if passes(step)), None)


def _in_step(chunks: Sequence[int], passes: Callable[[int], bool], nodes: int, size: int) -> int | None:
    for offset in range(size):
        hits = [chunk * size + offset for chunk in chunks if chunk * size + offset < nodes]
        found = [step for step in hits if passes(step)]
        if found:
            return min(found)
    return None


def chunks(passes: Callable[[int], bool], nodes: int, size: int) -> int | None:
    return _in_step(range(-(-nodes // size)), passes, nodes, size)


def two_at_a_time(passes: Callable[[int], bool], nodes: int, size: int) -> int | None:
    count = -(-nodes // size)
    for start in range(0, count, 2):
        found = _in_step(range(start, min(start + 2, count)), passes, nodes, size)
        if found is not None:
            return found
    return None


WAYS: dict[str, Pick] = {"first": first, "chunks": chunks, "two-at-a-time": two_at_a_time}


def walk(order: Sequence[str | None], last: int, pods: int, pick: Pick, size: int) -> list[str]:
    """The node each of `pods` pods lands on, searching `order` (None: a node that takes no pod)."""
    nodes = len(order)
    placed: list[str] = []
    for _ in range(pods):
        start = last + 1

        def passes(step: int, start: int = start) -> bool:
            return order[(step + start) % nodes] is not None

        step = pick(passes, nodes, size)
        if step is None:
            break
        last = (step + 1 + last) % nodes
        name = order[last]
        assert name is not None
        placed.append(name)
    return placed


def count(seen: Sequence[str], passing: Sequence[str], nodes: int, parallelism: int) -> dict[str, tuple[int, int]]:
    """Per way: how many (order, starting place) pairs give `seen`, and how many there are."""
    size = chunk_size(nodes, parallelism)
    found = dict.fromkeys(WAYS, 0)
    total = 0
    for places in itertools.combinations(range(nodes), len(passing)):
        for names in itertools.permutations(passing):
            order: list[str | None] = [None] * nodes
            for place, name in zip(places, names, strict=True):
                order[place] = name
            for last in range(nodes):
                total += 1
                for way, pick in WAYS.items():
                    if walk(order, last, len(seen), pick, size) == list(seen):
                        found[way] += 1
    return {way: (hits, total) for way, hits in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seen", required=True, help="the nodes the pods went to, in the log's order")
    parser.add_argument("--passing", required=True, help="the nodes that could take them")
    parser.add_argument("--nodes", type=int, required=True, help="nodes in the snapshot at that moment")
    parser.add_argument("--parallelism", type=int, default=4, help="--predicate-parallelism (default 4)")
    args = parser.parse_args()
    seen = args.seen.split(",")
    passing = args.passing.split(",")
    if not set(seen) <= set(passing) or len(passing) > args.nodes:
        parser.error("--seen must name only --passing nodes, and --passing at most --nodes of them")
    for way, (hits, total) in count(seen, passing, args.nodes, args.parallelism).items():
        print(f"{way:14} {hits:>9,} of {total:,} orders and starting places give what was seen")


if __name__ == "__main__":
    main()
