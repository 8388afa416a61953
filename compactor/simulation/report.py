"""A simulation's results for people (a table) and programs (JSON).

Every figure is per strategy over the measured period: node-hours (nodes
plus VMs being provisioned, what is billed) and what they cost per day at
the pools' prices (`prices`; null for all when a pool has no price, with a
warning naming it), the headline figures (above the lower bound, and against
the best native strategy: the one of `runner.NATIVE` lowest in the unit of
comparison), the change against the Cluster Autoscaler alone, and the share
of what the lower bound allows that a strategy recovered against it. Every
comparison is in money (`compared_by`) when every strategy and the lower
bound have a cost, else in node-hours, and each is also given in node-hours
beside it: when shapes differ, node-hours count a large node like a small one.
Then the node count, the gap to the lower bound at the night
plateau, pods evicted or deleted (by anyone) and per node removed, pod-minutes
spent pending, PodDisruptionBudget violations, and displaced pods whose
replacement found no node (each also by the actor that caused it), the seconds workloads spent without a Ready pod
after a removal (`availability`, by the actor that caused it), and for node-compactor what its runs decided: the
minutes spent acting, and when no drain was started, the gate that held it
back (the planner's `held_by`), minute by minute of the measured period.

The table fits `WIDTH` columns with the columns of `KEY_COLUMNS` for the unit of comparison (and its notes
wrapped), a column's name in two lines where its figures are narrower; `wide` shows every column. A strategy
whose every figure equals an earlier one's (`twins`) is one line naming that one. The JSON holds every figure
and every strategy either way.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson

from compactor.core.planner import BLOCKER_SUMMARY
from compactor.simulation import prices
from compactor.simulation.runner import NATIVE, Results, StrategyResult
from compactor.simulation.strategies import ACTIONS, FAILED_RUN

LOWER_BOUND = "lower-bound"
# The units a comparison may be in (the JSON's `comparedBy`).
COST = "costPerDay"
NODE_HOURS = "nodeHours"
# The default table fits a terminal this wide; `--wide` shows every column and may not.
WIDTH = 120
REPLACEMENTS = "REPLACEMENTS MADE/USED"
# The columns a person compares strategies by, in order, when every comparison is by cost (`COST`) and when it
# is by node-hours; the others are `--wide`'s.
KEY_COLUMNS = {
    COST: (
        "STRATEGY",
        "COST/DAY",
        "VS BEST NATIVE",
        "ABOVE BOUND",
        "NODE-HOURS",
        "EVICTIONS",
        "NO PLACE",
        "PENDING POD-MIN",
        REPLACEMENTS,
    ),
    NODE_HOURS: (
        "STRATEGY",
        "NODE-HOURS",
        "VS BEST NATIVE",
        "ABOVE BOUND",
        "COST/DAY",
        "EVICTIONS",
        "NO PLACE",
        "PENDING POD-MIN",
        REPLACEMENTS,
    ),
}
DECISION_WORDS = {
    "drain": "starting a drain",
    "continue-drain": "continuing a drain",
    "rollback": "rolling a drain back",
    FAILED_RUN: "a run that failed",
    "none": "no gate named",
}


def words(decision: str) -> str:
    """What a decision or a holding gate means, in the planner's words."""
    return DECISION_WORDS.get(decision) or BLOCKER_SUMMARY.get(decision, decision)


def summarize(results: Results) -> dict[str, Any]:
    setup = results.setup
    step_hours = setup.step_seconds / 3600
    window = plateau_window(results)
    figures = {s.name: _figures(s, results, step_hours) for s in results.strategies}
    bound = Figures(sum(results.lower_bound) * step_hours, _bound_cost(results))
    unit = compared_by([*figures.values(), bound])
    native = best_native(results, unit)
    base = figures.get("ca-alone")
    against = Baselines(unit, bound, figures[native.name] if native is not None else None, base)
    strategies = [_strategy(s, results, figures[s.name], against, window) for s in results.strategies]
    lower = {
        "name": LOWER_BOUND,
        "nodeHours": round(bound.node_hours, 1),
        # The cheapest capacity the requests may use, in fractional nodes (`bound.CheapestCapacity`).
        "costPerDay": _money(bound.cost_per_day),
        **{name: value for name, value in _comparisons(bound, against).items() if "Recovered" not in name},
        "aboveLowerBound": 0.0,
        "aboveLowerBoundNodeHours": 0.0,
        "nodes": _nodes(results.lower_bound),
        "byPool": {pool: _nodes(series) for pool, series in sorted(results.lower_bound_by_pool.items())},
        "series": {"nodes": results.lower_bound},
    }
    return {
        "scenario": {
            "name": setup.name,
            "description": setup.description,
            "source": setup.source,
            "sources": list(setup.sources),
            "start": setup.start.isoformat().replace("+00:00", "Z"),
            "hours": setup.hours,
            "warmupHours": setup.warmup_hours,
            "stepSeconds": setup.step_seconds,
            "seed": setup.seed,
            "nightPlateau": list(setup.night_plateau) if setup.night_plateau else None,
            "pools": [
                {"name": p.name, "machineType": p.machine_type, "minNodes": p.min_nodes, "maxNodes": p.max_nodes}
                for p in setup.pools
            ],
            "startNodes": results.start_nodes,
        },
        "minutes": results.strategies[0].series.minutes if results.strategies else [],
        # What every comparison (aboveLowerBound, vsBestNative, vsCaAlone, savingsRecovered) is in: costPerDay
        # when every strategy and the lower bound have a cost, else nodeHours.
        "comparedBy": unit,
        "strategies": [*strategies, lower],
        # The native strategy (what GKE does by configuration alone) lowest in `comparedBy`.
        "bestNative": {
            "name": native.name,
            "nodeHours": round(figures[native.name].node_hours, 1),
            "costPerDay": _money(figures[native.name].cost_per_day),
        }
        if native is not None
        else None,
        "prices": _prices(results),
        "warnings": warnings(results),
        "seconds": round(results.seconds, 1),
    }


@dataclass(frozen=True)
class Figures:
    """What a strategy (or the lower bound) used over the measured period: node-hours, and their cost per day
    (None when a node has no price)."""

    node_hours: float
    cost_per_day: float | None

    def of(self, unit: str) -> float | None:
        return self.cost_per_day if unit == COST else self.node_hours


@dataclass(frozen=True)
class Baselines:
    """What every strategy is compared against, and in which unit (`compared_by`)."""

    unit: str
    bound: Figures
    native: Figures | None
    ca_alone: Figures | None


def compared_by(figures: Iterable[Figures]) -> str:
    """Money (`COST`) when every strategy and the lower bound have a cost per day, else node-hours: when shapes
    differ, node-hours compare nodes of different prices as if they were alike."""
    return COST if all(f.cost_per_day is not None for f in figures) else NODE_HOURS


def _figures(result: StrategyResult, results: Results, step_hours: float) -> Figures:
    measured_hours = len(result.series.nodes) * step_hours
    by_pool = {pool: sum(series) * step_hours for pool, series in result.series.nodes_by_pool.items()}
    return Figures(sum(result.series.nodes) * step_hours, prices.per_day(results.setup, by_pool, measured_hours))


def _comparisons(figures: Figures, against: Baselines) -> dict[str, float | None]:
    """The headline figures in `against.unit`, and beside them the same in node-hours."""

    def change(base: Figures | None, unit: str) -> float | None:
        return None if base is None else _change(figures.of(unit), base.of(unit))

    def recovered(unit: str) -> float | None:
        if against.ca_alone is None:
            return None
        return _recovered(figures.of(unit), against.ca_alone.of(unit), against.bound.of(unit))

    return {
        "aboveLowerBound": change(against.bound, against.unit),
        "aboveLowerBoundNodeHours": change(against.bound, NODE_HOURS),
        "vsBestNative": change(against.native, against.unit),
        "vsBestNativeNodeHours": change(against.native, NODE_HOURS),
        "vsCaAlone": change(against.ca_alone, against.unit),
        "vsCaAloneNodeHours": change(against.ca_alone, NODE_HOURS),
        "savingsRecovered": recovered(against.unit),
        "savingsRecoveredNodeHours": recovered(NODE_HOURS),
    }


def warnings(results: Results) -> list[str]:
    """Why a cost is null: each pool without a price, and node-hours on nodes outside the pools."""
    found = prices.warnings(results.setup)
    pools = {pool.name for pool in results.setup.pools}
    outside = sorted(
        {
            s.name
            for s in results.strategies
            for pool, series in s.series.nodes_by_pool.items()
            if pool not in pools and any(series)
        }
    )
    if outside:
        found.append(f"nodes without the pool label have no price: costPerDay is null for {', '.join(outside)}")
    return found


def _prices(results: Results) -> dict[str, Any]:
    setup = results.setup
    pools: dict[str, Any] = {}
    for pool in setup.pools:
        price = setup.prices.get(pool.name)
        pools[pool.name] = (
            {"perHour": None, "spot": None, "region": None, "source": None, "asOf": None, "problem": "not priced"}
            if price is None
            else {
                "perHour": price.per_hour,
                "spot": price.spot,
                "region": price.region,
                "source": price.source or None,
                "asOf": price.as_of,
                "problem": price.problem,
            }
        )
    return {"currency": setup.currency, "pools": pools}


def _bound_cost(results: Results) -> float | None:
    """The cost lower bound's mean cost per hour over the measured period, for 24 hours."""
    costs = results.lower_bound_cost
    if not costs:
        return None
    return sum(costs) / len(costs) * prices.HOURS_A_DAY


def _replacement(item: dict[str, object]) -> dict[str, object]:
    """One replacement a planner started, its prices per hour to four places (as a plan's report has them)."""
    money = ("removedPricePerHour", "pricePerHour", "savingsPerHour")
    return {key: round(value, 4) if key in money and isinstance(value, float) else value for key, value in item.items()}


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def best_native(results: Results, unit: str | None = None) -> StrategyResult | None:
    """Of the strategies GKE offers by configuration (`runner.NATIVE`), the one lowest in `unit` (by default
    `compared_by`'s): the cheapest per day when every node has a price, else the one with the fewest node-hours."""
    step_hours = results.setup.step_seconds / 3600
    native = {s.name: (s, _figures(s, results, step_hours)) for s in results.strategies if s.name in NATIVE}
    if not native:
        return None
    if unit is None:
        strategies = [_figures(s, results, step_hours) for s in results.strategies]
        unit = compared_by([*strategies, Figures(0.0, _bound_cost(results))])
    name = min(native, key=lambda name: (native[name][1].of(unit) or 0.0, name))
    return native[name][0]


def plateau_window(results: Results) -> tuple[int, int] | None:
    """Steps [first, last] of the first night plateau in the measured period."""
    plateau = results.setup.night_plateau
    if plateau is None or not results.strategies:
        return None
    begin, end = plateau
    steps = [
        index
        for index, minutes in enumerate(results.strategies[0].series.minutes)
        if _in_hours(results.setup.start + timedelta(minutes=minutes), begin, end)
    ]
    if not steps:
        return None
    first = steps[0]
    last = first
    while last + 1 in steps:
        last += 1
    return first, last


def _in_hours(moment: datetime, begin: float, end: float) -> bool:
    hour = moment.hour + moment.minute / 60
    return begin <= hour < end if begin <= end else hour >= begin or hour < end


def _strategy(
    result: StrategyResult,
    results: Results,
    figures: Figures,
    against: Baselines,
    window: tuple[int, int] | None,
) -> dict[str, Any]:
    recorder = result.recorder
    step_hours = results.setup.step_seconds / 3600
    disruptions = recorder.disruptions()
    actors = sorted(set(recorder.evicted) | set(recorder.deleted))
    decisions = _decisions(result.series.decisions, step_hours * 60)
    above = [
        decision
        for decision, nodes, bound in zip(
            result.series.decisions, result.series.nodes, results.lower_bound, strict=False
        )
        if nodes > bound
    ]
    decisions_above = _decisions(above, step_hours * 60) if decisions else None
    return {
        "name": result.name,
        "nodeHours": round(figures.node_hours, 1),
        # In the setup's currency, per 24 hours: the measured period's cost scaled to a day.
        "costPerDay": _money(figures.cost_per_day),
        # The headline figures, in `comparedBy`: above the lower bound, and against the best native strategy;
        # each also in node-hours (`...NodeHours`).
        **_comparisons(figures, against),
        "nodes": _nodes(result.series.nodes),
        "nightPlateau": _plateau(result.series.nodes, results.lower_bound, window),
        "nodesAdded": recorder.nodes_added,
        "nodesRemoved": recorder.nodes_removed,
        "evictions": disruptions,
        "evictionsByActor": {
            actor: {"evicted": recorder.evicted[actor], "deleted": recorder.deleted[actor]} for actor in actors
        },
        "evictionsPerNodeRemoved": round(disruptions / recorder.nodes_removed, 1) if recorder.nodes_removed else None,
        "pendingPodMinutes": round(recorder.pending_pod_seconds / 60),
        "pdbViolations": sum(recorder.pdb_violations.values()),
        "pdbViolationsByActor": dict(sorted(recorder.pdb_violations.items())),
        "noPlace": sum(recorder.no_place.values()),
        "noPlaceByActor": dict(sorted(recorder.no_place.items())),
        "unplaceablePods": len(recorder.unplaceable),
        # kube-scheduler's preemptions: node replacement's placeholders (no disruption), and other pods (counted
        # in evictions too, by the actor kube-scheduler).
        "placeholdersPreempted": recorder.preempted_placeholders,
        "podsPreempted": sum(recorder.preempted.values()),
        # The new nodes a planner's replacements asked for (placeholders created), and of them those a displaced pod
        # needed (the placeholder preempted); None for a strategy without a planner.
        "replacements": {
            "made": result.summary.get("placeholdersCreated", 0),
            "used": recorder.preempted_placeholders,
            "started": [_replacement(item) for item in recorder.replacements],
        }
        if decisions
        else None,
        "lostJobMinutes": round(recorder.lost_job_seconds / 60),
        "lostJobMinutesByActor": {
            actor: round(seconds / 60) for actor, seconds in sorted(recorder.lost_job_seconds_by_actor.items())
        },
        # Workloads left without a Ready pod (`availability`): for a single-replica service, the
        # replica-seconds from its eviction until the replacement is Ready; none for a surging restart.
        "noReadyPodSeconds": round(sum(recorder.no_ready_seconds.values())),
        "noReadyPodSecondsByActor": {
            actor: round(seconds) for actor, seconds in sorted(recorder.no_ready_seconds.items())
        },
        "noReadyPodSpans": sum(recorder.no_ready_spans.values()),
        "runs": result.summary,
        "decisionMinutes": decisions,
        "heldBackBy": {kind: minutes for kind, minutes in decisions.items() if kind not in ACTIONS}
        if decisions
        else None,
        # The same, counting only the minutes when the strategy had more nodes than the lower bound: what cost savings.
        "decisionMinutesAboveBound": decisions_above or ({} if decisions else None),
        # The pods that most often held node-compactor back by fitting nowhere else: what `no-fit` waited on.
        "noFitPods": [{"pod": held.pod, "runs": held.runs, "why": held.why} for held in result.no_fit],
        "failures": result.failures[:20],
        "seconds": round(result.seconds, 1),
        "series": {
            "nodes": result.series.nodes,
            "pending": result.series.pending,
            **({"decisions": result.series.decisions} if decisions else {}),
        },
    }


def _decisions(series: list[str | None], step_minutes: float) -> dict[str, float] | None:
    """Minutes of the measured period under each decision of the latest run, most first; None without a planner."""
    counts = Counter(decision for decision in series if decision is not None)
    if not counts:
        return None
    return {decision: round(count * step_minutes, 1) for decision, count in counts.most_common()}


def _recovered(value: float | None, base: float | None, bound: float | None) -> float | None:
    """(CA alone - this) / (CA alone - lower bound): the share of the possible savings this strategy made."""
    if value is None or base is None or bound is None or base - bound <= 0:
        return None
    return round((base - value) / (base - bound), 3)


def _change(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return round((value - base) / base, 4)


def _nodes(series: list[int]) -> dict[str, Any]:
    if not series:
        return {"start": None, "min": None, "max": None, "mean": None, "end": None}
    return {
        "start": series[0],
        "min": min(series),
        "max": max(series),
        "mean": round(sum(series) / len(series), 1),
        "end": series[-1],
    }


def _plateau(nodes: list[int], bound: list[int], window: tuple[int, int] | None) -> dict[str, Any] | None:
    if window is None or not bound:
        return None
    first, last = window
    span = range(first, last + 1)
    mean_nodes = sum(nodes[i] for i in span) / len(span)
    mean_bound = sum(bound[i] for i in span) / len(span)
    gap = nodes[last] - bound[last]
    return {
        "meanNodes": round(mean_nodes, 1),
        "meanLowerBound": round(mean_bound, 1),
        "meanGapPercent": round(100 * (mean_nodes - mean_bound) / mean_bound, 1) if mean_bound else None,
        "endNodes": nodes[last],
        "endLowerBound": bound[last],
        "endGapNodes": gap,
        "endGapPercent": round(100 * gap / bound[last], 1) if bound[last] else None,
    }


# `simulate --json`'s own contract, versioned apart from the run's report (compactor/report.py): it goes up
# when a field is renamed, removed or changes its meaning, never for a field added.
SCHEMA_VERSION = 1


def to_json(results: Results) -> bytes:
    return orjson.dumps({"schemaVersion": SCHEMA_VERSION, **summarize(results)}, option=orjson.OPT_INDENT_2)


def to_table(results: Results, *, wide: bool = False) -> str:
    return table(summarize(results), wide=wide)


def table(data: dict[str, Any], *, wide: bool = False) -> str:
    """`summarize`'s figures as a table: the columns of `KEY_COLUMNS` within `WIDTH`, or with `wide` all of them."""
    scenario = data["scenario"]
    lines = [
        *_wrap(
            f"{scenario['name']}: {_hours(scenario['hours'])} from {scenario['start']} in {scenario['stepSeconds']} s "
            "steps"
            + (
                f", after a {_hours(scenario['warmupHours'])} warm-up with the Cluster Autoscaler alone"
                if scenario["warmupHours"]
                else ""
            )
        ),
        "",
    ]
    unit = data["comparedBy"]
    native_name = data["bestNative"]["name"] if data["bestNative"] else None
    cells = _cells(data["strategies"], native_name, unit)
    key = KEY_COLUMNS[unit]
    shown = list(cells) if wide else [column for column in key if column in cells]
    order = sorted(shown, key=lambda column: key.index(column) if column in key else len(key))
    while not wide and len(order) > 2 and _width(cells, order) > WIDTH:
        order.pop()  # a strategy name longer than any today: the last key column gives way, named below
    same = twins(data["strategies"])
    lines.extend(_rows(data["strategies"], cells, order, same))
    lines.append("")
    notes = dict(_column_notes(data, native_name))
    lines.extend(_wrap(" ".join(note for column, note in notes.items() if column in order or column == "")))
    if not wide:
        hidden = ", ".join(column for column in cells if column not in order)
        lines.extend(_wrap(f"More columns ({hidden}): --wide; every figure and the series: --json."))
        violated = [
            f"{item['name']} {item['pdbViolations']}" for item in data["strategies"] if item.get("pdbViolations")
        ]
        if "PDB VIOLATIONS" not in order and violated:
            lines.extend(_wrap(f"PDB VIOLATIONS (--wide): {', '.join(violated)}."))
    lines.extend(_wrap(_cost_line(data)))
    for warning in data["warnings"]:
        lines.extend(_wrap(f"warning: {warning}"))
    for item in data["strategies"]:
        if item["name"] not in same:
            lines.extend(_held_lines(item, [name for name, twin in same.items() if twin == item["name"]]))
    for item in data["strategies"]:
        if item.get("failures") and item["name"] not in same:
            lines.extend(_wrap(f"{item['name']}: {len(item['failures'])} failed run(s), first: {item['failures'][0]}"))
    lines.append(f"Simulated in {data['seconds']:.1f} s.")
    return "\n".join(lines) + "\n"


def _cells(strategies: list[dict[str, Any]], native_name: str | None, unit: str) -> dict[str, list[str]]:
    """Each column's text for each strategy and the lower bound, by header, in `--wide`'s order. With costs,
    the node-hours comparisons stand beside the headline ones (NODE-HOURS ...)."""
    columns: dict[str, list[str]] = {}

    def column(header: str, text: Callable[[dict[str, Any], bool], str]) -> None:
        columns[header] = [text(item, item["name"] == LOWER_BOUND) for item in strategies]

    column("STRATEGY", lambda item, bound: item["name"])
    column("COST/DAY", lambda item, bound: "-" if item["costPerDay"] is None else f"{item['costPerDay']:.2f}")
    column("VS BEST NATIVE", lambda item, bound: _vs(item, "vsBestNative", native_name))
    column("ABOVE BOUND", lambda item, bound: "-" if bound else _percent(item["aboveLowerBound"]))
    column("NODE-HOURS", lambda item, bound: f"{item['nodeHours']:.1f}")
    if unit == COST:
        column("NODE-HOURS VS NATIVE", lambda item, bound: _vs(item, "vsBestNativeNodeHours", native_name))
        column(
            "NODE-HOURS ABOVE BOUND", lambda item, bound: "-" if bound else _percent(item["aboveLowerBoundNodeHours"])
        )
    column("VS CA ALONE", lambda item, bound: _vs(item, "vsCaAlone", "ca-alone"))
    column(
        "RECOVERED",
        lambda item, bound: (
            "-"
            if bound or item["savingsRecovered"] is None or item["name"] == "ca-alone"
            else f"{item['savingsRecovered'] * 100:.0f}%"
        ),
    )
    column("NODES MIN-MAX", lambda item, bound: f"{item['nodes']['min']}-{item['nodes']['max']}")
    column(
        "NIGHT GAP",
        lambda item, bound: (
            "-"
            if not (plateau := item.get("nightPlateau"))
            else f"{plateau['endGapNodes']:+d} ({plateau['endGapPercent']:.0f}%)"
        ),
    )
    column("REMOVED", lambda item, bound: "-" if bound else str(item["nodesRemoved"]))
    column("EVICTIONS", lambda item, bound: "-" if bound else str(item["evictions"]))
    column(
        "PER NODE",
        lambda item, bound: (
            "-" if bound or item["evictionsPerNodeRemoved"] is None else f"{item['evictionsPerNodeRemoved']:.1f}"
        ),
    )
    column("PENDING POD-MIN", lambda item, bound: "-" if bound else str(item["pendingPodMinutes"]))
    column("PDB VIOLATIONS", lambda item, bound: "-" if bound else str(item["pdbViolations"]))
    column("NO PLACE", lambda item, bound: "-" if bound else str(item["noPlace"]))
    column("NO READY POD-S", lambda item, bound: "-" if bound else str(item["noReadyPodSeconds"]))
    column(
        REPLACEMENTS,
        lambda item, bound: "-" if not item.get("replacements") else "{made} / {used}".format(**item["replacements"]),
    )
    return columns


def twins(strategies: list[dict[str, Any]]) -> dict[str, str]:
    """Each strategy whose every figure and series equals an earlier strategy's, mapped to that one: a person reads
    it once (node-compactor+surge where no pool surges is node-compactor minute for minute). Its own evictions
    count as the other's own (`...ByActor` names the strategy)."""
    found: dict[str, str] = {}
    kept: list[tuple[str, dict[str, Any]]] = []
    for item in strategies:
        if item["name"] == LOWER_BOUND:
            continue
        figures = {
            field: {("itself" if actor == item["name"] else actor): by for actor, by in value.items()}
            if field.endswith("ByActor")
            else value
            for field, value in item.items()
            if field not in ("name", "seconds")
        }
        twin = next((name for name, other in kept if other == figures), None)
        if twin is None:
            kept.append((item["name"], figures))
        else:
            found[item["name"]] = twin
    return found


def _rows(
    strategies: list[dict[str, Any]], cells: dict[str, list[str]], order: list[str], same: dict[str, str]
) -> list[str]:
    """The header (in two lines where a column's values are narrower than its name) and a row a strategy; a twin
    (`twins`) in one line naming the strategy it equals."""
    headers = [_header(column, cells[column]) for column in order]
    widths = [
        max(len(top), len(bottom), *(len(text) for text in cells[column]))
        for column, (top, bottom) in zip(order, headers, strict=True)
    ]

    def line(texts: list[str]) -> str:
        aligned = [
            text.ljust(width) if i == 0 else text.rjust(width)
            for i, (text, width) in enumerate(zip(texts, widths, strict=True))
        ]
        return "  ".join(aligned).rstrip()

    lines = [line([top for top, _ in headers])] if any(top for top, _ in headers) else []
    lines.append(line([bottom for _, bottom in headers]))
    for row, item in enumerate(strategies):
        twin = same.get(item["name"])
        if twin is None:
            lines.append(line([cells[column][row] for column in order]))
        else:
            lines.append(f"{item['name'].ljust(widths[0])}  same figures as {twin}")
    return lines


def _header(column: str, values: list[str]) -> tuple[str, str]:
    """`column`'s name as (top line, bottom line): split at the space or after the hyphen that leaves the longer
    line shortest when its values are narrower than the name, else whole on the bottom line."""
    widest = max((len(text) for text in values), default=0)
    splits = [
        (column[:i], column[i + 1 :]) if char == " " else (column[: i + 1], column[i + 1 :])
        for i, char in enumerate(column)
        if char in " -"
    ]
    best = min(splits, key=lambda split: max(len(part) for part in split), default=None)
    if best is None or len(column) <= widest or max(len(part) for part in best) >= len(column):
        return "", column
    return best


def _vs(item: dict[str, Any], field: str, base_name: str | None) -> str:
    """A change against a strategy, "-" for that strategy itself."""
    return "-" if item[field] is None or item["name"] == base_name else _percent(item[field])


def _width(cells: dict[str, list[str]], order: list[str]) -> int:
    return sum(
        max(*(len(part) for part in _header(column, cells[column])), *(len(text) for text in cells[column]))
        for column in order
    ) + 2 * (len(order) - 1)


def _column_notes(data: dict[str, Any], native_name: str | None) -> list[tuple[str, str]]:
    """What each column means, by the column it explains: a note is shown only with its column."""
    notes: list[tuple[str, str]] = []
    by_cost = data["comparedBy"] == COST
    if not by_cost:
        # "" : a note shown whatever the columns.
        notes.append(("", "Every comparison is in node-hours: not every node has a price (see the warnings below)."))
    if native_name is not None:
        native = f"({native_name}; native: {', '.join(_natives_run(data))})"
        notes += [
            (
                "ABOVE BOUND",
                "ABOVE BOUND: cost per day above the cost lower bound."
                if by_cost
                else "ABOVE BOUND: node-hours above the lower bound.",
            ),
            (
                "VS BEST NATIVE",
                f"VS BEST NATIVE: cost per day against the cheapest native strategy {native}."
                if by_cost
                else f"VS BEST NATIVE: node-hours against the native strategy with the fewest {native}.",
            ),
            ("NODE-HOURS VS NATIVE", "NODE-HOURS VS NATIVE and NODE-HOURS ABOVE BOUND: the same in node-hours."),
        ]
    if data["scenario"]["nightPlateau"]:
        begin, end = data["scenario"]["nightPlateau"]
        notes.append(
            (
                "NIGHT GAP",
                "NIGHT GAP: nodes minus the lower bound at the end of the night plateau "
                f"({_clock(begin)}-{_clock(end)} UTC).",
            )
        )
    notes += [
        (
            "RECOVERED",
            "RECOVERED: (CA alone - strategy) / (CA alone - lower bound), in "
            + ("cost per day." if by_cost else "node-hours."),
        ),
        ("EVICTIONS", "EVICTIONS: pods evicted or deleted by any actor;"),
        ("PER NODE", "PER NODE: per node removed;"),
        ("PDB VIOLATIONS", "PDB VIOLATIONS: disruptions a PodDisruptionBudget did not allow;"),
        ("NO PLACE", "NO PLACE: displaced pods whose replacement found no node;"),
        ("PENDING POD-MIN", "PENDING POD-MIN: pod-minutes spent pending."),
        (
            REPLACEMENTS,
            "REPLACEMENTS MADE/USED: new nodes node replacement asked for (placeholders created) / of them, those a "
            "displaced pod needed (the placeholder preempted).",
        ),
        (
            "NO READY POD-S",
            "NO READY POD-S: seconds workloads spent with no Ready pod after a pod was removed (for a "
            "single-replica service: from its eviction until the replacement is Ready).",
        ),
    ]
    return notes


def _natives_run(data: dict[str, Any]) -> list[str]:
    """The native strategies this run has (gke-class-priorities only where a pod may use two pools)."""
    names = {item["name"] for item in data["strategies"]}
    return [name for name in NATIVE if name in names]


def _wrap(text: str, indent: str = "  ") -> list[str]:
    """`text` in lines of at most `WIDTH` columns, the lines after the first indented; a word longer stays whole."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False) or [""]


def _cost_line(data: dict[str, Any]) -> str:
    priced = data["prices"]
    pools = priced["pools"]
    origins = [
        f"list prices as of {day}, without discounts" for day in sorted({p["asOf"] for p in pools.values()} - {None})
    ]
    given = sorted(name for name, pool in pools.items() if pool["perHour"] is not None and pool["asOf"] is None)
    if given:
        origins.append(f"pricePerHour for {', '.join(given)}")
    return (
        f"COST/DAY: {priced['currency']} per 24 hours at each pool's node price ({'; '.join(origins) or 'none'}); "
        "the lower bound's: the cheapest capacity the requests may use, in fractional nodes."
    )


def _held_lines(item: dict[str, Any], twins: list[str]) -> list[str]:
    """What a planner's runs decided, minute by minute; `twins` (`twins`): the strategies that decided the same."""
    decisions: dict[str, float] | None = item.get("decisionMinutes")
    if not decisions:
        return []
    above: dict[str, float] = item.get("decisionMinutesAboveBound") or {}
    total = sum(decisions.values())
    acting = sum(minutes for kind, minutes in decisions.items() if kind in ACTIONS)
    owners = ", ".join(twin + "'s" for twin in twins)
    also = f" ({owners} too: the same figures)" if twins else ""
    lines = [
        "",
        *_wrap(
            f"{item['name']}: what its runs decided{also}, in minutes of the {total:g} measured "
            f"(acting {acting:g}, {100 * acting / total:.0f}%; held back {total - acting:g}); "
            f"ABOVE BOUND: of those, the minutes with more nodes than the lower bound ({sum(above.values()):g}):"
        ),
    ]
    width = max(len(kind) for kind in decisions)
    lines.append(f"  {'DECISION'.ljust(width)}  {'MINUTES':>7}  {'SHARE':>5}  {'ABOVE BOUND':>11}  ROLE    MEANING")
    for kind, minutes in decisions.items():
        role = "acting" if kind in ACTIONS else "held"
        row = (
            f"  {kind.ljust(width)}  {minutes:7g}  {100 * minutes / total:4.0f}%  {above.get(kind, 0):11g}  {role:6}  "
        )
        # A long meaning goes on under MEANING, so the column stays one.
        lines.extend(_wrap(row + words(kind), " " * len(row)))
    held = item.get("noFitPods") or []
    if held:
        runs = sum(1 for decision in item["series"].get("decisions", ()) if decision == "no-fit")
        lines += _wrap(f"  no-fit waited most on (of {runs} minutes held by it):", "    ")
        for entry in held:
            text = f"    {entry['pod']} in {entry['runs']} run(s): fits on no other node ({entry['why']})"
            lines += _wrap(text, "      ")
    return lines


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _hours(value: float) -> str:
    return f"{value:g} h"


def _clock(hour: float) -> str:
    return f"{int(hour):02d}:{round((hour % 1) * 60):02d}"
