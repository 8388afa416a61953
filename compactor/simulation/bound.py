"""The cost lower bound: the cheapest fractional capacity that holds every pod's requests, as a linear program.

At each measured step the pods that are not DaemonSet pods (`Demand`, one group per owner, home pool and volume
zone) are spread over places, a place being one zone of one pool, and each place gets a fractional number of
nodes; the bound is the least the nodes can cost. A group may use a place when an empty node of the pool in
that zone (`objects.template_node`, labelled and tainted as the autoscaler makes them) lets one of its pods in
(nodeSelector, required node affinity, tolerations, extended resources: `fit.could_use`) and its requests fit
the node's room (allocatable less the DaemonSet pods every node of the pool carries), and, when its
PersistentVolumeClaims are bound to a zone, only in that zone (as the scheduler pins it, `scheduler.prepared`).

The program, over x[g, q] (the share of group g placed in place q) and n[q] (nodes of place q, fractional):

    minimize    sum over q of price(pool of q) * n[q]
    subject to  sum over q of x[g, q] = 1                                   every group is placed
                sum over g of cpu[g] * x[g, q] <= room_cpu * n[q]           each place holds the cpu ...
                sum over g of memory[g] * x[g, q] <= room_memory * n[q]     ... the memory ...
                sum over g of pods[g] * x[g, q] <= room_pods * n[q]         ... and the pods (max pods less DaemonSets)
                sum over g of owner o of pods[g] * x[g, q] <= n[q]          replicas that repel each other on
                                                                            kubernetes.io/hostname: a node each
                sum over zones of a pool of n[q] >= minNodes                the pool's minimum (pool-wide, as
                                                                            the autoscaler model keeps it)

When every pod runs, a strategy's nodes at a step are a feasible point (a group's share in a place the share
of its pods that run there, n the nodes there), so no strategy costs less; pending pods count as if placed, as
the node-hours bound counts them (the VMs provisioned for them are billed from the request:
tests/simulation/test_lower_bound.py checks every step of every shipped scenario). Where cpu-heavy and
memory-heavy pods may share a pool the program finds the mix, which a group-by-group choice misses. Splitting
pools by zone tightens it only where volumes pin pods to a zone (pods pinned to two zones share no node).
Groups whose pods fit no place at all (too big for any node, or selecting labels no pool has) are left out:
no strategy can run them, so none pays for them. Left out too, which only lowers the bound: anti-affinity
between different owners, topology spread, maxNodes.

Groups with the same places and the same shape (cpu : memory : pods, so their pods are alike), of one owner
when its replicas repel each other, are one set of columns: a share of the merged group is that share of each.
The program is solved with HiGHS (`highspy`, the simulator's extra, never the function's: imported here only
when a bound is set up) once per distinct demand; steps repeat, so results are cached by the merged demand.

Must never: change what is simulated, nor be imported by anything the Cloud Function loads.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from compactor.core import fit, pools
from compactor.core.model import Node, Pod
from compactor.errors import BadInputError
from compactor.simulation import objects
from compactor.simulation.model import Setup

if TYPE_CHECKING:
    import highspy

# A place: one zone of one pool.
Place = tuple[str, str]


@dataclass
class Demand:
    """The requests of one owner's pods (or of one pod without an owner) whose home is one pool."""

    home: str
    owner: Hashable  # what makes its pods alike for the pool predicates: the owner, else the pod's key
    pod: Pod  # one of them
    cpu_millis: int
    memory_bytes: int
    pods: int = 1  # how many
    zone: str | None = None  # the zone its PersistentVolumeClaims are bound to, if any


class Room(NamedTuple):
    """What a node of a pool has for the pods that are not DaemonSet pods."""

    cpu_millis: int
    memory_bytes: int
    pods: int


@dataclass(frozen=True)
class _Place:
    pool: str
    zone: str
    price: float
    room: Room
    node: Node  # an empty node of the pool in this zone


class _Column(NamedTuple):
    """A merged group: its places, the owner whose replicas repel each other (else None), its totals."""

    places: tuple[int, ...]
    repels: Hashable | None
    cpu_millis: int
    memory_bytes: int
    pods: int


class CheapestCapacity:
    """What the cheapest fractional capacity for the requests costs per hour, step by step (see the module)."""

    def __init__(self, setup: Setup, rooms: Mapping[str, Room], pool_label: str) -> None:
        require()
        self.places: list[_Place] = []
        self.min_nodes: dict[str, tuple[int, list[int]]] = {}
        for pool in setup.pools:
            found = setup.prices.get(pool.name)
            if found is None or found.per_hour is None:
                raise ValueError(f"pool {pool.name} has no price")
            indexes = []
            for zone in pool.zones:
                node = objects.template_node(replace(pool, zones=(zone,)), pool_label)
                indexes.append(len(self.places))
                self.places.append(_Place(pool.name, zone, found.per_hour, rooms[pool.name], node))
            self.min_nodes[pool.name] = (pool.min_nodes, indexes)
        self._allowed: dict[tuple[Hashable, str | None], tuple[int, ...]] = {}
        self._cache: dict[frozenset[_Column], float] = {}
        self._highs: highspy.Highs | None = None
        self.solves = 0  # programs solved (the rest came from the cache)

    def per_hour(self, demand: Iterable[Demand]) -> float:
        columns = self._columns(demand)
        key = frozenset(columns)
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = self._solve(sorted(columns, key=_order))
        return cost

    def allowed(self, group: Demand) -> tuple[Place, ...]:
        """The places the group's pods may use."""
        return tuple((self.places[i].pool, self.places[i].zone) for i in self._places_of(group))

    def _places_of(self, group: Demand) -> tuple[int, ...]:
        key = (group.owner, group.zone)
        allowed = self._allowed.get(key)
        if allowed is None:
            allowed = self._allowed[key] = tuple(
                index
                for index, place in enumerate(self.places)
                if (group.zone is None or place.zone == group.zone) and _may_hold(place, group.pod)
            )
        return allowed

    def _columns(self, demand: Iterable[Demand]) -> dict[_Column, None]:
        merged: dict[tuple[tuple[int, ...], Hashable | None, tuple[int, int, int]], list[int]] = {}
        for group in demand:
            places = self._places_of(group)
            if not places:
                continue  # it fits no node of any pool: nobody runs it, nobody pays for it
            repels = group.owner if pools.repels_itself(group.pod) else None
            divisor = math.gcd(group.cpu_millis, group.memory_bytes, group.pods) or 1
            shape = (group.cpu_millis // divisor, group.memory_bytes // divisor, group.pods // divisor)
            totals = merged.setdefault((places, repels, shape), [0, 0, 0])
            totals[0] += group.cpu_millis
            totals[1] += group.memory_bytes
            totals[2] += group.pods
        return {
            _Column(places, repels, cpu, memory, count): None
            for (places, repels, _), (cpu, memory, count) in merged.items()
        }

    def _solve(self, columns: list[_Column]) -> float:
        import highspy

        if self._highs is None:
            self._highs = highspy.Highs()  # type: ignore[no-untyped-call]  # its __init__ is unannotated
            self._highs.setOptionValue("output_flag", False)
        self.solves += 1
        inf = highspy.kHighsInf
        cost = [place.price for place in self.places]  # n[q] first, then the shares
        lower = [0.0] * len(self.places)
        upper = [inf] * len(self.places)
        # Rows as {column: coefficient}; capacity rows in nodes of the place (requests / room), for scale.
        rows: list[dict[int, float]] = []
        row_lower: list[float] = []
        row_upper: list[float] = []
        capacity: list[tuple[dict[int, float], dict[int, float], dict[int, float]]] = [
            ({q: -1.0}, {q: -1.0}, {q: -1.0}) for q in range(len(self.places))
        ]
        repelling: dict[tuple[Hashable, int], dict[int, float]] = {}
        for column in columns:
            shares = {}
            for q in column.places:
                index = shares[q] = len(cost)
                cost.append(0.0)
                lower.append(0.0)
                upper.append(1.0)
                room = self.places[q].room
                by_cpu, by_memory, by_pods = capacity[q]
                by_cpu[index] = column.cpu_millis / room.cpu_millis if room.cpu_millis > 0 else 0.0
                by_memory[index] = column.memory_bytes / room.memory_bytes if room.memory_bytes > 0 else 0.0
                by_pods[index] = column.pods / room.pods if room.pods > 0 else 0.0
                if column.repels is not None:
                    repelling.setdefault((column.repels, q), {q: -1.0})[index] = float(column.pods)
            rows.append(dict.fromkeys(shares.values(), 1.0))
            row_lower.append(1.0)
            row_upper.append(1.0)
        for row in [*(row for rows_of_q in capacity for row in rows_of_q), *repelling.values()]:
            if len(row) > 1:
                rows.append(row)
                row_lower.append(-inf)
                row_upper.append(0.0)
        for minimum, indexes in self.min_nodes.values():
            if minimum > 0:
                rows.append(dict.fromkeys(indexes, 1.0))
                row_lower.append(float(minimum))
                row_upper.append(inf)
        model = highs_lp(cost, lower, upper, rows, row_lower, row_upper)
        highs = self._highs
        highs.clearModel()
        highs.passModel(model)
        highs.run()
        status = highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"the cost lower bound's program was not solved: {highs.modelStatusToString(status)}")
        return float(highs.getInfo().objective_function_value)


def highs_lp(
    cost: list[float],
    lower: list[float],
    upper: list[float],
    rows: list[dict[int, float]],
    row_lower: list[float],
    row_upper: list[float],
) -> highspy.HighsLp:
    """A linear program for HiGHS: minimise `cost` over columns within [lower, upper], each row (column -> factor)
    within [row_lower, row_upper], the matrix given row by row."""
    import highspy

    model = highspy.HighsLp()
    model.num_col_ = len(cost)
    model.num_row_ = len(rows)
    model.col_cost_ = cost
    model.col_lower_ = lower
    model.col_upper_ = upper
    model.row_lower_ = row_lower
    model.row_upper_ = row_upper
    model.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    starts, columns_of, values = [0], list[int](), list[float]()
    for row in rows:
        columns_of.extend(row)
        values.extend(row.values())
        starts.append(len(columns_of))
    model.a_matrix_.start_ = starts
    model.a_matrix_.index_ = columns_of
    model.a_matrix_.value_ = values
    return model


def require() -> None:
    """Fail before the measured steps, not at the first one's end, when the solver is missing."""
    try:
        import highspy  # noqa: F401
    except ImportError as error:
        raise BadInputError(
            "the simulator's cost lower bound needs highspy, which the function does not ship: "
            "pip install -r requirements-simulate.txt (or '.[simulate]')"
        ) from error


def _order(column: _Column) -> tuple[tuple[int, ...], str, int, int, int]:
    return column.places, repr(column.repels), column.cpu_millis, column.memory_bytes, column.pods


def _may_hold(place: _Place, pod: Pod) -> bool:
    requests = place.room
    if pod.requests.cpu_millis > requests.cpu_millis or pod.requests.memory_bytes > requests.memory_bytes:
        return False
    if requests.pods < 1:
        return False
    return fit.could_use(pod, place.node)  # taints, nodeSelector, node affinity, extended resources
