"""`Draws`: the simulator's seeded sources give the sequences `random.Random` gives, and count every draw, so the
quiet-loop check can compare counts instead of the generators' states."""

from __future__ import annotations

import random

from compactor.simulation.draws import Draws


def _everything(source: random.Random) -> list[object]:
    items = list(range(40))
    source.shuffle(items)
    return [
        items,
        source.random(),
        source.choice("abcdefgh"),
        source.randrange(7, 99),
        source.uniform(1.0, 2.0),
        source.sample(range(100), 5),
        source.choices(range(10), k=3),
        source.gauss(0.0, 1.0),
        source.randbytes(4),
        source.randint(0, 10**30),
    ]


def test_the_same_seed_gives_random_s_sequence_and_state() -> None:
    plain, counted = random.Random("seed:scheduler"), Draws("seed:scheduler")
    assert _everything(plain) == _everything(counted)
    assert plain.getstate() == counted.getstate()


def test_the_count_moves_exactly_when_the_state_does() -> None:
    source = Draws(53)
    for call in (lambda: source.random(), lambda: source.choice([1, 2, 3]), lambda: source.shuffle([1, 2, 3])):
        state, draws = source.getstate(), source.draws
        call()
        assert source.getstate() != state and source.draws > draws
    state, draws = source.getstate(), source.draws
    source.shuffle([1])  # one item: nothing drawn
    source.sample([], 0)
    assert source.getstate() == state and source.draws == draws
