"""The HPA floor's report: per HPA its replicas, each floor, the new minimum and why (JSON and a table)."""

from __future__ import annotations

from typing import Any

from compactor.hpa.model import Decision, Floor, Plan

# The report's contract, versioned apart from the compactor's (compactor/report.py): it goes up when a field is
# renamed, removed or changes its meaning, never for a field added.
SCHEMA_VERSION = 1


def decision_dict(decision: Decision) -> dict[str, Any]:
    hpa = decision.hpa
    floors: dict[str, Floor] = {floor.name: floor for floor in decision.floors}

    def floor(name: str) -> dict[str, Any] | None:
        found = floors.get(name)
        if found is None:
            return None
        entry: dict[str, Any] = {"value": found.value, "detail": found.detail}
        if name == "query":
            entry["result"] = found.result
        return entry

    return {
        "namespace": hpa.namespace,
        "name": hpa.name,
        "enabled": decision.enabled,
        "currentReplicas": hpa.current_replicas,
        "minReplicas": hpa.min_replicas,
        "maxReplicas": hpa.max_replicas,
        "floors": {name: floor(name) for name in ("query", "ratio", "lowerBound", "base")},
        "newMinReplicas": decision.new_min_replicas,
        "action": decision.action,
        "capped": decision.capped,
        "reason": decision.reason,
        "problems": list(decision.problems),
    }


def to_dict(plan: Plan, *, outcome: dict[str, Any] | None = None, dry_run: bool | None = None) -> dict[str, Any]:
    summary = {action: plan.count(action) for action in ("raise", "lower", "restore", "none", "skip", "fail")}
    document: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "hpas": [decision_dict(d) for d in plan.decisions],
        "summary": summary,
    }
    if outcome is not None:
        document["outcome"] = outcome
    if dry_run is not None:
        document["dryRun"] = dry_run
    return document


def to_table(plan: Plan) -> str:
    if not plan.decisions:
        return "no HorizontalPodAutoscalers\n"
    rows = [("HPA", "CURRENT", "MIN", "MAX", "QUERY", "RATIO", "NEW MIN", "ACTION", "WHY")]
    for decision in plan.decisions:
        hpa = decision.hpa
        floors = {floor.name: floor.value for floor in decision.floors}
        rows.append(
            (
                hpa.key,
                _text(hpa.current_replicas),
                str(hpa.min_replicas),
                str(hpa.max_replicas),
                _text(floors.get("query")),
                _text(floors.get("ratio")),
                _text(decision.new_min_replicas) + (" (capped)" if decision.capped else ""),
                decision.action,
                decision.reason,
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)
