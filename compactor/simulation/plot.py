"""The node count of every strategy over the day, with the lower bound drawn in, as a PNG.

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

COLORS = {"ca-alone": "#d62728", "estafette": "#ff7f0e", "node-compactor": "#1f77b4"}


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
    figure = Figure(figsize=(10, 5.6), dpi=100)
    nodes_axis, pending_axis = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    strategies: list[dict[str, Any]] = data["strategies"]
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
            axis.axvspan(hours[window[0]], hours[window[1]], color="#2ca02c", alpha=0.08, linewidth=0)
    nodes_axis.set_ylabel("nodes (billed)")
    nodes_axis.set_ylim(bottom=0)
    nodes_axis.set_title(f"{data['scenario']['name']}: node count over the day")
    nodes_axis.legend(loc="lower left", fontsize=9)
    nodes_axis.grid(alpha=0.3)
    pending_axis.set_ylabel("pending pods")
    pending_axis.grid(alpha=0.3)
    start = results.setup.start
    ticks = [h for h in range(0, int(max(hours, default=0)) + 1, 3)]
    pending_axis.set_xticks(ticks)
    pending_axis.set_xticklabels([(start + timedelta(hours=h)).strftime("%H:%M") for h in ticks])
    pending_axis.set_xlabel("time of day (UTC)" + ("; night plateau shaded" if window else ""))
    figure.tight_layout()
    try:
        figure.savefig(path, format="png")
    except OSError as error:
        raise BadInputError(f"cannot write the plot {path}: {error.strerror or error}") from error
