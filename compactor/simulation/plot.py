"""The node count of every strategy over the day, with the lower bound drawn in, as a PNG.

Below the node counts, the pending pods; below those, a band per strategy
that has a planner (node-compactor): what its latest run decided at each
moment, a drain or the gate that held it back, one colour per reason.

A colour means one thing in every panel: a strategy's colour is its node
count, its pending pods and its own drains in its band (continuing a drain
lighter, a rollback black); the reasons a run was held back are in colours
no strategy uses (hatched once those run out); the night plateau is shaded
in a colour of its own.

matplotlib is imported only here and only when a plot is asked for, with the
Agg backend (no display); it is in requirements-simulate.txt, never in the
function's requirements.txt.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from compactor.errors import BadInputError
from compactor.simulation import report
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


ACTING = ("drain", "continue-drain", "rollback")
ROLLBACK_COLOR = "#000000"
# Brown, pink and olive, dark and light: none is a strategy's colour, the lower bound's grey or the plateau's.
HELD_COLORS = ("#8c564b", "#e377c2", "#bcbd22", "#c49c94", "#f7b6d2", "#dbdb8d")
HELD_HATCHES = ("", "//", "..", "xx")
PLATEAU_COLOR = "#ffd700"


def band_styles(strategy: str, kinds: list[str]) -> dict[str, tuple[str, str]]:
    """(colour, hatch) of each kind in `strategy`'s decision band: its own drains in its own colour,
    the reasons it was held back in `HELD_COLORS`, hatched past the sixth."""
    own = COLORS.get(strategy, COLORS["node-compactor"])
    styles = {"drain": (own, ""), "continue-drain": (own + "80", ""), "rollback": (ROLLBACK_COLOR, "")}
    held = [kind for kind in kinds if kind not in ACTING]
    for index, kind in enumerate(held):
        turn, slot = divmod(index, len(HELD_COLORS))
        styles[kind] = (HELD_COLORS[slot], HELD_HATCHES[turn % len(HELD_HATCHES)])
    return styles


def require() -> None:
    """Fail before a long simulation, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise BadInputError(
            "--plot needs matplotlib, which the function does not ship: pip install -r requirements-simulate.txt"
        ) from error


def write(results: Results, path: str) -> None:
    require()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    data = report.summarize(results)
    minutes: list[float] = data["minutes"]
    hours = [m / 60 for m in minutes]
    strategies: list[dict[str, Any]] = data["strategies"]
    banded = [item for item in strategies if item.get("decisionMinutes")]
    figure = Figure(figsize=(10, 5.6 + 0.9 * len(banded)), dpi=100)
    axes = figure.subplots(
        2 + len(banded), 1, sharex=True, gridspec_kw={"height_ratios": [3, 1, *(0.6 for _ in banded)]}
    )
    nodes_axis, pending_axis = axes[0], axes[1]
    bound = next(s for s in strategies if s["name"] == report.LOWER_BOUND)
    nodes_axis.fill_between(
        hours,
        0,
        bound["series"]["nodes"],
        step="post",
        color="0.88",
        label=f"lower bound ({bound['nodeHours']:.0f} node-h)",
    )
    nodes_axis.step(hours, bound["series"]["nodes"], where="post", color="0.45", linestyle="--", linewidth=1)
    for item in strategies:
        if item["name"] == report.LOWER_BOUND:
            continue
        label = f"{item['name']} ({item['nodeHours']:.0f} node-h)"
        color = COLORS.get(item["name"])
        nodes_axis.step(hours, item["series"]["nodes"], where="post", label=label, color=color, linewidth=1.6)
        pending_axis.step(hours, item["series"]["pending"], where="post", color=color, linewidth=1)
    window = report.plateau_window(results)
    if window is not None:
        for axis in (nodes_axis, pending_axis):
            axis.axvspan(hours[window[0]], hours[window[1]], color=PLATEAU_COLOR, alpha=0.12, linewidth=0)
    for axis, item in zip(axes[2:], banded, strict=True):
        _decision_band(axis, item, hours, data["scenario"]["stepSeconds"] / 3600)
    nodes_axis.set_ylabel("nodes (billed)")
    nodes_axis.set_ylim(bottom=0)
    nodes_axis.set_title(f"{data['scenario']['name']}: node count over the day")
    nodes_axis.legend(loc="lower left", fontsize=9)
    nodes_axis.grid(alpha=0.3)
    pending_axis.set_ylabel("pending pods")
    pending_axis.grid(alpha=0.3)
    start = results.setup.start
    ticks = [h for h in range(0, int(max(hours, default=0)) + 1, 3)]
    bottom = axes[-1]
    bottom.set_xticks(ticks)
    bottom.set_xticklabels([(start + timedelta(hours=h)).strftime("%H:%M") for h in ticks])
    bottom.set_xlabel("time of day (UTC)" + ("; night plateau shaded" if window else ""))
    figure.tight_layout()
    try:
        figure.savefig(path, format="png")
    except OSError as error:
        raise BadInputError(f"cannot write the plot {path}: {error.strerror or error}") from error


def _decision_band(axis: Any, item: dict[str, Any], hours: list[float], step_hours: float) -> None:
    """One row of coloured spans: what the latest run decided, minute by minute; the legend says the reason."""
    decisions: list[str | None] = item["series"]["decisions"]
    ranked = list(item["decisionMinutes"])
    styles = band_styles(item["name"], ranked)
    spans: dict[str, list[tuple[float, float]]] = {}
    start = 0
    for index in range(1, len(decisions) + 1):
        if index == len(decisions) or decisions[index] != decisions[start]:
            kind = decisions[start]
            if kind is not None:
                end = hours[index - 1] + step_hours
                spans.setdefault(kind, []).append((hours[start], end - hours[start]))
            start = index
    for kind in ranked:
        minutes = item["decisionMinutes"][kind]
        color, hatch = styles[kind]
        axis.broken_barh(
            spans.get(kind, []),
            (0, 1),
            facecolors=color,
            hatch=hatch or None,
            edgecolor="white" if hatch else None,
            label=f"{kind} ({minutes:g} min)",
            linewidth=0,
        )
    axis.set_yticks([])
    axis.set_ylim(0, 1)
    axis.set_ylabel(item["name"], rotation=0, ha="right", va="center", fontsize=8)
    axis.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False, title="decided / held by")
