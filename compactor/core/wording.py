"""How amounts read in blockers, reasons and tables: one wording everywhere."""

from __future__ import annotations

from collections.abc import Sequence

# Names listed in one sentence; a cluster of hundreds of pools or nodes gets a count for the rest.
MAX_NAMES = 10


def names(items: Sequence[str]) -> str:
    """`a, b, c` with at most MAX_NAMES of them, then how many more."""
    shown = ", ".join(items[:MAX_NAMES])
    if len(items) > MAX_NAMES:
        shown += f" and {len(items) - MAX_NAMES} more"
    return shown or "none"


def percent(ratio: float | None, *, missing: str = "n/a") -> str:
    """0.614 -> "61%"; `missing` when the ratio is unknown (a node with no allocatable)."""
    return missing if ratio is None else f"{ratio * 100:.0f}%"


def mebibytes(amount: int) -> str:
    """Bytes as whole MiB: 1073741824 -> "1024Mi"."""
    return f"{amount / 2**20:.0f}Mi"


def thousandths(amount: int) -> str:
    """An extended resource's amount (kept in thousandths): 1000 -> "1", 500 -> "500m"."""
    return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"


# What each predicate of the fit simulation (`fit.Simulation.why_not`) found on a node that refused a
# pod, as "N with ...". A name not listed here is an extended resource (`nvidia.com/gpu`) the node
# has too little of.
REFUSALS = {
    "taint": "a taint it does not tolerate",
    "nodeSelector": "labels its nodeSelector does not match",
    "node affinity": "labels its required node affinity does not match",
    "zone of its volume": "another zone than its volume",
    "cpu": "too little free cpu",
    "memory": "too little free memory",
    "pod count": "no room for another pod (its pod limit)",
    "host port": "its host port taken",
    "pod anti-affinity": "a pod its pod anti-affinity keeps away",
    "pod affinity": "no pod its pod affinity needs",
    "topology spread": "too much skew for its topology spread",
}


def refusal(reason: str) -> str:
    return REFUSALS.get(reason) or f"too little free {reason}"
