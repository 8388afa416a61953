"""A simulated day of every strategy as a PNG: node count, cost per hour, pending pods, and what the planner decided.

Panels, top to bottom, on one time axis: the node count of each strategy with the lower bound shaded; what those
nodes cost per hour in the setup's currency with the cost lower bound shaded (no panel when a pool has no price);
the pending pods; then a band per strategy with a planner (node-compactor): what its latest run decided at each
moment, a drain or the gate that held it back.

A colour means one thing in the whole figure: a strategy's colour is its line in every panel; a decision's colour
(`decision_styles`) is the same in every band and no strategy's; the night plateau is shaded in a colour of its
own. node-compactor's variants, often on top of one another, differ by line style too. A strategy whose every
figure equals another's (`report.twins`) is drawn once, its label naming both. The legends stand outside the
axes, so no curve is hidden: the strategies' to the right, the decisions' below.

matplotlib is imported only here and only when a plot is asked for, with the Agg backend (no display); it is in
requirements-simulate.txt, never in the function's requirements.txt. Must never: change a figure (it draws
`report.summarize`'s and the prices' series as they are).
"""

from __future__ import annotations

import math
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from compactor.errors import BadInputError
from compactor.simulation import prices, report
from compactor.simulation.runner import Results

COLORS = {
    "ca-alone": "#d62728",
    "ca-optimize-utilization": "#9467bd",
    "gke-consolidation-threshold": "#2ca02c",
    "gke-class-priorities": "#98df8a",
    "estafette": "#ff7f0e",
    "node-compactor": "#1f77b4",
    "node-compactor+threshold": "#17becf",
    "node-compactor+surge": "#393b79",
    "node-compactor+priorities": "#6baed6",
}
# node-compactor's variants often draw the same line as node-compactor: a style each keeps them apart.
LINE_STYLES = {"node-compactor+threshold": "--", "node-compactor+surge": ":", "node-compactor+priorities": "-."}

# Acting, in teal and black; the reasons a run was held back in brown, pink, olive and gold, dark and light:
# none is a strategy's colour, the lower bound's grey or the plateau's.
ACTING_COLORS = {"drain": "#01665e", "continue-drain": "#80cdc1", "rollback": "#000000"}
HELD_COLORS = ("#8c564b", "#e377c2", "#bcbd22", "#c49c94", "#f7b6d2", "#dbdb8d", "#637939", "#8c6d31", "#e7cb94")
HELD_HATCHES = ("", "//", "..", "xx")
PLATEAU_COLOR = "#ffd700"
# The longest strategy label that three legend columns hold across the figure's 12 inches at 8 points.
LEGEND_COLUMN_CHARS = 58
BOUND_FILL = "0.88"
BOUND_LINE = "0.45"


def decision_styles(kinds: Iterable[str]) -> dict[str, tuple[str, str]]:
    """(colour, hatch) of each decision, for every band of a figure: acting in `ACTING_COLORS`, the reasons held
    back in `HELD_COLORS` in the order given (the most minutes first), hatched once those run out."""
    styles: dict[str, tuple[str, str]] = {}
    held = 0
    for kind in kinds:
        if kind in styles:
            continue
        if kind in ACTING_COLORS:
            styles[kind] = (ACTING_COLORS[kind], "")
            continue
        turn, slot = divmod(held, len(HELD_COLORS))
        styles[kind] = (HELD_COLORS[slot], HELD_HATCHES[turn % len(HELD_HATCHES)])
        held += 1
    return styles


def require() -> None:
    """Fail before a long simulation, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise BadInputError(
            "--plot needs matplotlib, which the function does not ship: pip install -r requirements-simulate.txt"
        ) from error


def check_path(path: str) -> None:
    """Fail before a long simulation, not after it, when the PNG could not be written there: a directory, a
    folder that does not exist or one where no file can be created (tried with a file removed at once)."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise BadInputError(f"--plot: {path} is a directory; give a file name, such as {target / 'savings.png'}")
    if not folder.exists():
        raise BadInputError(f"--plot: cannot write {path}: the directory {folder} does not exist")
    if not folder.is_dir():
        raise BadInputError(f"--plot: cannot write {path}: {folder} is not a directory")
    try:
        if target.exists():
            with target.open("ab"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".node-compactor-plot-"):
                pass
    except OSError as error:
        where = "" if target.exists() else f": no file can be created in {folder}"
        raise BadInputError(f"--plot: cannot write {path}{where} ({error.strerror or error})") from error


def write(results: Results, path: str) -> None:
    figure = draw(results)
    try:
        figure.savefig(path, format="png")
    except OSError as error:
        raise BadInputError(f"cannot write the plot {path}: {error.strerror or error}") from error


def draw(results: Results) -> Any:
    """The figure (a matplotlib `Figure`), for `write` to save and tests to read."""
    require()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    data = report.summarize(results)
    hours = [minute / 60 for minute in data["minutes"]]
    step_hours = data["scenario"]["stepSeconds"] / 3600
    # Each sample holds for its step: the last one until the end of the measured period.
    edges = [*hours, hours[-1] + step_hours] if hours else []

    def held(series: list[Any]) -> list[Any]:
        return [*series, series[-1]] if series else []

    same = report.twins(data["strategies"])
    shown = [item for item in data["strategies"] if item["name"] != report.LOWER_BOUND and item["name"] not in same]
    bound = next(item for item in data["strategies"] if item["name"] == report.LOWER_BOUND)
    costs = {s.name: prices.per_hour(results.setup, s.series.nodes_by_pool) for s in results.strategies}
    priced = all(series is not None for series in costs.values())
    banded = [item for item in shown if item.get("decisionMinutes")]
    heights = [3.0, *([2.2] if priced else []), 1.2, *(0.42 for _ in banded)]
    figure = Figure(figsize=(12, 2.6 + sum(heights) + 0.22 * len(banded)), dpi=100, layout="constrained")
    axes = list(figure.subplots(len(heights), 1, sharex=True, gridspec_kw={"height_ratios": heights}))
    nodes_axis = axes.pop(0)
    cost_axis = axes.pop(0) if priced else None
    pending_axis = axes.pop(0)
    currency = data["prices"]["currency"]

    nodes_axis.fill_between(edges, 0, held(bound["series"]["nodes"]), step="post", color=BOUND_FILL, linewidth=0)
    nodes_axis.step(edges, held(bound["series"]["nodes"]), where="post", color=BOUND_LINE, linestyle="--", linewidth=1)
    handles = [_bound_handle(f"lower bound: {bound['nodeHours']:.0f} node-h")]
    if cost_axis is not None and results.lower_bound_cost:
        bound_cost = results.lower_bound_cost
        cost_axis.fill_between(edges, 0, held(bound_cost), step="post", color=BOUND_FILL, linewidth=0)
        cost_axis.step(edges, held(bound_cost), where="post", color=BOUND_LINE, linestyle="--", linewidth=1)
        handles.append(_bound_handle(f"cost lower bound: {bound['costPerDay']:.2f} {currency}/day"))
    for item in shown:
        name = item["name"]
        style = {
            "color": COLORS.get(name),
            "linestyle": LINE_STYLES.get(name, "-"),
            "linewidth": 1.8 if name.startswith("node-compactor") else 1.4,
            "zorder": 3 if name.startswith("node-compactor") else 2,
        }
        (line,) = nodes_axis.step(
            edges, held(item["series"]["nodes"]), where="post", label=_label(item, same, currency), **style
        )
        handles.append(line)
        series = costs[name]
        if cost_axis is not None and series is not None:
            cost_axis.step(edges, held(series), where="post", **style)
        pending_axis.step(edges, held(item["series"]["pending"]), where="post", **{**style, "linewidth": 1.0})
    window = report.plateau_window(results)
    if window is not None:
        for axis in (nodes_axis, cost_axis, pending_axis):
            if axis is not None:
                axis.axvspan(edges[window[0]], edges[window[1] + 1], color=PLATEAU_COLOR, alpha=0.12, linewidth=0)
    scenario = data["scenario"]
    nodes_axis.set_ylabel("nodes (billed)")
    nodes_axis.set_ylim(bottom=_floor(nodes_axis))
    if cost_axis is not None:
        cost_axis.set_ylabel(f"{currency} per hour")
        cost_axis.set_ylim(bottom=_floor(cost_axis))
    pending_axis.set_ylabel("pending pods")
    pending_axis.set_ylim(0, max(1, pending_axis.get_ylim()[1]))  # a day with no pending pod reads 0, not 0.00
    nodes_axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    pending_axis.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    for axis in (nodes_axis, cost_axis, pending_axis):
        if axis is not None:
            axis.grid(alpha=0.3)
    # The title heads the strategies' legend: a figure title and a legend outside the axes would overlap.
    longest = max(len(handle.get_label()) for handle in handles)
    figure.legend(
        handles=handles,
        loc="outside upper center",
        ncols=3 if longest <= LEGEND_COLUMN_CHARS else 2,
        fontsize=8,
        frameon=False,
        title=f"{scenario['name']}: {scenario['hours']:g} h from {results.setup.start:%Y-%m-%d %H:%M} UTC",
        title_fontsize=12,
    )

    minutes: Counter[str] = Counter()
    for item in banded:
        minutes.update(item["decisionMinutes"])
    styles = decision_styles(kind for kind, _ in sorted(minutes.items(), key=lambda entry: (-entry[1], entry[0])))
    for axis, item in zip(axes, banded, strict=True):
        _decision_band(axis, item, hours, step_hours, styles, same)
    if banded:
        _decision_legend(figure, styles)

    start = results.setup.start
    bottom = axes[-1] if axes else pending_axis
    end = edges[-1] if edges else 0.0
    every = 3 if end >= 6 else 1
    ticks = list(range(0, math.floor(end) + 1, every))
    bottom.set_xlim(0, end)
    bottom.set_xticks(ticks)
    bottom.set_xticklabels([(start + timedelta(hours=hour)).strftime("%H:%M") for hour in ticks])
    bottom.set_xlabel("time of day (UTC)" + ("; night plateau shaded" if window else ""))
    return figure


def _floor(axis: Any) -> float:
    """Where an axis of counts or costs starts: at 0, unless every line stays far above it; then below the
    lowest, so lines that differ by a node or two stand apart (the tick labels say where it starts)."""
    values = [value for line in axis.lines for value in line.get_ydata()]
    low, high = min(values, default=0.0), max(values, default=0.0)
    return 0.0 if low <= 0.4 * high else math.floor(0.85 * low)


def _label(item: dict[str, Any], same: dict[str, str], currency: str) -> str:
    """A strategy's legend entry: its name (and those of its twins) and what it used over the measured period."""
    names = " = ".join([item["name"], *(name for name, twin in same.items() if twin == item["name"])])
    cost = "" if item["costPerDay"] is None else f"{item['costPerDay']:.2f} {currency}/day, "
    return f"{names}: {cost}{item['nodeHours']:.0f} node-h"


def _bound_handle(label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=BOUND_FILL, edgecolor=BOUND_LINE, linestyle="--", label=label)


def _decision_band(
    axis: Any,
    item: dict[str, Any],
    hours: list[float],
    step_hours: float,
    styles: dict[str, tuple[str, str]],
    same: dict[str, str],
) -> None:
    """One row of coloured spans: what the latest run decided, minute by minute, each decision labelled."""
    decisions: list[str | None] = item["series"]["decisions"]
    spans: dict[str, list[tuple[float, float]]] = {}
    start = 0
    for index in range(1, len(decisions) + 1):
        if index == len(decisions) or decisions[index] != decisions[start]:
            kind = decisions[start]
            if kind is not None:
                end = hours[index - 1] + step_hours
                spans.setdefault(kind, []).append((hours[start], end - hours[start]))
            start = index
    for kind in item["decisionMinutes"]:
        color, hatch = styles[kind]
        axis.broken_barh(
            spans.get(kind, []),
            (0, 1),
            facecolors=color,
            hatch=hatch or None,
            edgecolor="white" if hatch else None,
            label=kind,
            linewidth=0,
        )
    twins = [name for name, twin in same.items() if twin == item["name"]]
    axis.set_yticks([])
    axis.set_ylim(0, 1)
    axis.set_ylabel("\n= ".join([item["name"], *twins]), rotation=0, ha="right", va="center", fontsize=8)


def _decision_legend(figure: Any, styles: dict[str, tuple[str, str]]) -> None:
    from matplotlib.patches import Patch

    handles = [
        Patch(
            facecolor=color,
            hatch=hatch or None,
            edgecolor="white" if hatch else color,
            label=textwrap.fill(f"{kind}: {report.words(kind)}", 52, subsequent_indent="  "),
        )
        for kind, (color, hatch) in styles.items()
    ]
    figure.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 3),
        fontsize=8,
        frameon=False,
        title="node-compactor's latest run: what it did, or the gate that held it back (one colour each in every band)",
        title_fontsize=8,
    )
