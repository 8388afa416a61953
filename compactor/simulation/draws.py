"""A seeded random source that counts its draws.

The simulator's quiet-loop check (`runner.Cluster.step`) asks whether a loop drew anything from a seeded source:
comparing draw counts answers it as comparing `getstate()` would (a draw always moves the Mersenne Twister's
state; no draw leaves it), without copying 625 words each time.
"""

from __future__ import annotations

import random


class Draws(random.Random):
    """`random.Random`, the same sequence for the same seed, with `draws`: how many draws were made from it.

    Every method of `random.Random` draws through `random()` or `getrandbits()` (`choice`, `shuffle` and
    `randrange` through `getrandbits`, as they do in the base class when a subclass overrides both), so
    counting those two counts every draw. A copy (`copy.deepcopy`, pickling) restarts the count at 0: only
    counts taken on one object are compared."""

    draws: int

    def __init__(self, seed: int | float | str | bytes | bytearray | None = None) -> None:
        self.draws = 0
        super().__init__(seed)

    def random(self) -> float:
        self.draws += 1
        return super().random()

    def getrandbits(self, k: int, /) -> int:
        self.draws += 1
        return super().getrandbits(k)
