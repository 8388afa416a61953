"""How amounts read in blockers, reasons and tables: one wording everywhere."""

from __future__ import annotations


def percent(ratio: float | None, *, missing: str = "n/a") -> str:
    """0.614 -> "61%"; `missing` when the ratio is unknown (a node with no allocatable)."""
    return missing if ratio is None else f"{ratio * 100:.0f}%"


def mebibytes(amount: int) -> str:
    """Bytes as whole MiB: 1073741824 -> "1024Mi"."""
    return f"{amount / 2**20:.0f}Mi"
