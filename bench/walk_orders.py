"""Which ways of walking the nodes can give the placements the Cluster Autoscaler logged.

The autoscaler's removal simulation puts each pod of a node on a node that passes kube-scheduler's
filters, searching its snapshot's node list from one past the last match. This counts, over every
order of the list and every starting place, how often each way of searching gives the sequence of
nodes a log showed (`Pod … can be moved to …`, at `--v=4`) for one node's pods:

- `first`: the first passing node in order;
- `chunks`: the simulator's own search (`first_match` in compactor/simulation/autoscaler.py): chunks
  of about the square root of the node count, `--predicate-parallelism` (4) of them in step, the
  earliest match of the first step that finds one taken (the first match cancels the rest);
- `two-at-a-time`: the same with two chunks in step at a time, as on a 2-core machine.

Only which nodes pass matters here: every node in `--passing` takes each pod, the others none.
A count of 0 means that way of searching cannot give what was logged.

    python bench/walk_orders.py --seen 03,04,00,01,07,03,04 --passing 00,01,02,03,04,07 --nodes 10
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from compactor.simulation.autoscaler import first_match  # noqa: E402

# (node count, last match, whether the node at an index passes) -> the index taken, or None.
Pick = Callable[[int, int, Callable[[int], bool]], int | None]


def first(count: int, last: int, passes: Callable[[int], bool]) -> int | None:
    walk = ((last + 1 + step) % count for step in range(count))
    return next((index for index in walk if passes(index)), None)


def ways(parallelism: int) -> dict[str, Pick]:
    return {
        "first": first,
        "chunks": functools.partial(first_match, parallelism=parallelism),
        "two-at-a-time": functools.partial(first_match, parallelism=2),
    }


def walk(order: Sequence[str | None], last: int, pods: int, pick: Pick) -> list[str]:
    """The node each of `pods` pods lands on, searching `order` (None: a node that takes no pod)."""
    placed: list[str] = []
    for _ in range(pods):
        index = pick(len(order), last, lambda index: order[index] is not None)
        if index is None:
            break
        last = index
        name = order[last]
        assert name is not None
        placed.append(name)
    return placed


def count(seen: Sequence[str], passing: Sequence[str], nodes: int, parallelism: int) -> dict[str, tuple[int, int]]:
    """Per way: how many (order, starting place) pairs give `seen`, and how many there are."""
    picks = ways(parallelism)
    found = dict.fromkeys(picks, 0)
    total = 0
    for places in itertools.combinations(range(nodes), len(passing)):
        for names in itertools.permutations(passing):
            order: list[str | None] = [None] * nodes
            for place, name in zip(places, names, strict=True):
                order[place] = name
            for last in range(nodes):
                total += 1
                for way, pick in picks.items():
                    if walk(order, last, len(seen), pick) == list(seen):
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
