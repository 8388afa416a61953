"""The plan as people and programs read it: the JSON report (DESIGN.md) and a table.

The JSON field names are a contract; fields may be added, never renamed. `schemaVersion` says which
contract a document follows: it goes up when a field is renamed, removed or changes its meaning, never
for a field added, so a reader that checks it can trust every field it knows.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from compactor.core.plan import ConsolidationPath, Plan, PoolReport, Preview, Replacement
from compactor.core.planner import BLOCKER_SUMMARY
from compactor.core.prices import pricing
from compactor.core.timing import format_stamp, human, seconds_between
from compactor.core.wording import percent

SCHEMA_VERSION = 1

# What produced the report: `plan` (a saved snapshot; nothing is ever written), a live run that writes
# nothing (`dry-run`: the function's dryRun, `run --dry-run`, or the configuration's dryRun) or one that acts.
Mode = Literal["plan", "dry-run", "run"]


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True)


class DecisionModel(_Model):
    action: str
    node: str | None
    pool: str | None
    reason: str
    evictions: list[str] = Field(default_factory=list)
    placements: dict[str, str] = Field(default_factory=dict)
    # continue-drain only: why nothing is evicted now (the drain waits, then rolls back at its timeout).
    held: str | None = None
    # Pods moved by a rolling restart of their Deployment instead of an eviction: pod -> Deployment
    # ("namespace/name" both; pools with surgeSingleReplicas).
    restarts: dict[str, str] = Field(default_factory=dict)
    # drain and continue-drain: what the node costs per hour, saved once the Cluster Autoscaler removes it.
    savings_per_hour: float | None = Field(None, serialization_alias="savingsPerHour")


class ReplacementModel(_Model):
    """Node replacement (DESIGN "Node replacement"): the one under way or started by this run."""

    step: str  # create, wait, drain, delete, give-up
    placeholder: str  # the first placeholder (kept from when a replacement had one)
    placeholders: list[str]  # one per new node
    nodes: list[str]
    # DESIGN's `target` (a pool, or a machine type GKE creates a pool for), `targetPool` kept for a pool target.
    target: str
    target_pool: str | None = Field(serialization_alias="targetPool", exclude_if=lambda value: value is None)
    new_nodes: int = Field(serialization_alias="newNodes")
    # The placeholder selects Spot nodes (a Spot stockout fails the replacement instead of buying on-demand).
    spot: bool
    machine_type: str | None = Field(serialization_alias="machineType")
    zone: str | None
    price_per_hour: float | None = Field(serialization_alias="pricePerHour")
    removed_price_per_hour: float | None = Field(serialization_alias="removedPricePerHour")
    savings_per_hour: float | None = Field(serialization_alias="savingsPerHour")
    reason: str
    failed: list[str] = Field(default_factory=list)


class SingleReplicaModel(_Model):
    """A single-replica pod of a node in a pool with surgeSingleReplicas, and what a drain does with it."""

    pod: str
    owner: str
    action: str  # "restart", "wait" (this drain's restart is rolling out) or "evict" (the normal rules)
    reason: str


class MarksModel(_Model):
    add: list[str]
    remove: list[str]


class NodeModel(_Model):
    name: str
    pool: str | None
    cpu_ratio: float | None = Field(serialization_alias="cpuRatio")
    memory_ratio: float | None = Field(serialization_alias="memoryRatio")
    underutilized: bool
    marked_since: str | None = Field(serialization_alias="markedSince")
    candidate: bool
    blockers: list[str]
    ready: bool
    cordoned: bool
    pods: int
    pods_to_move: int = Field(serialization_alias="podsToMove")
    # Only for nodes in a pool with surgeSingleReplicas that hold single-replica pods.
    single_replica_pods: list[SingleReplicaModel] | None = Field(
        None, serialization_alias="singleReplicaPods", exclude_if=lambda value: value is None
    )
    price_per_hour: float | None = Field(None, serialization_alias="pricePerHour")
    # Pools with replacement enabled: why a replacement was or was not chosen for the node, with the prices.
    replacement: str | None = Field(None, exclude_if=lambda value: value is None)


class PoolModel(_Model):
    name: str
    enabled: bool
    # Whether the configuration names the pool: false explains `enabled: false` without a word in it.
    configured: bool
    nodes: int
    underutilized: int
    lower_bound_nodes: int = Field(serialization_alias="lowerBoundNodes")
    excess_nodes: int = Field(serialization_alias="excessNodes")
    # Enabled pools beside a GKE ComputeClass (`core.coexistence`): the consolidationThreshold the pool
    # follows (a fraction), where it comes from ("cluster": the ComputeClass read, "configuration": the
    # pool's computeClassConsolidationThreshold), the class read, and why node-compactor leaves the
    # pool to the Cluster Autoscaler. Absent without a threshold.
    consolidation_threshold: float | None = Field(
        None, serialization_alias="consolidationThreshold", exclude_if=lambda value: value is None
    )
    threshold_source: str | None = Field(
        None, serialization_alias="thresholdSource", exclude_if=lambda value: value is None
    )
    compute_class: str | None = Field(None, serialization_alias="computeClass", exclude_if=lambda value: value is None)
    left_to_autoscaler: str | None = Field(
        None, serialization_alias="leftToAutoscaler", exclude_if=lambda value: value is None
    )
    # What the pool's nodes cost per hour, and its lower bound of nodes at its cheapest node's price (null
    # when a node has no price: `priceNote` says why).
    price_per_hour: float | None = Field(None, serialization_alias="pricePerHour")
    cost_lower_bound_per_hour: float | None = Field(None, serialization_alias="costLowerBoundPerHour")
    price_note: str | None = Field(None, serialization_alias="priceNote", exclude_if=lambda value: value is None)


class PathStepModel(_Model):
    node: str
    pool: str | None
    pods_moved: int = Field(serialization_alias="podsMoved")
    nodes_after: int = Field(serialization_alias="nodesAfter")


class PathModel(_Model):
    steps: list[PathStepModel]
    reaches_lower_bound: bool = Field(serialization_alias="reachesLowerBound")
    stopped_because: str = Field(serialization_alias="stoppedBecause")
    estimated_minutes: float = Field(serialization_alias="estimatedMinutes")
    # What could make the path wrong that the plan can see (nodes the Cluster Autoscaler may remove first).
    caveats: list[str] = Field(default_factory=list)


class PreviewModel(_Model):
    node: str
    pool: str | None
    earliest: str
    reason: str


class SteeringModel(_Model):
    nodes: list[str]
    add: list[str]
    remove: list[str]


class ReportModel(_Model):
    schema_version: int = Field(SCHEMA_VERSION, serialization_alias="schemaVersion")
    mode: Mode
    decision: DecisionModel
    marks: MarksModel
    # `replaceable-since` put on and taken off nodes of pools with replacement on (DESIGN rule 10).
    replaceable: MarksModel
    nodes: list[NodeModel]
    pools: list[PoolModel]
    # Whether this report's run writes nothing: true for `plan` and every dry run.
    dry_run: bool = Field(serialization_alias="dryRun")
    now: str
    # When nothing is done: the gate that held this run ({"kind", "summary"}), else None.
    held_by: dict[str, str] | None = Field(serialization_alias="heldBy")
    awaiting_removal: list[str] = Field(serialization_alias="awaitingRemoval")
    soft_taints: MarksModel = Field(serialization_alias="softTaints")
    # The reserved taint: put on the nodes a new drain keeps room on, taken off when no drain runs.
    reservations: MarksModel
    # Scale-down steering: the nodes the ReplicaSet controller's scale-downs are pointed at, and the
    # pods ("namespace/name") that get or lose node-compactor's pod-deletion-cost.
    scale_down_steering: SteeringModel = Field(serialization_alias="scaleDownSteering")
    # The drains that would follow if nothing changed; null where it was not computed (acting runs).
    path: PathModel | None
    # More nodes given back in this run beside the decision's rollback: [{"node", "reason"}].
    more_rollbacks: list[dict[str, str]] = Field(default_factory=list, serialization_alias="moreRollbacks")
    # Nodes whose drain-started-at lies in the future: rewritten to now, so the drain times out.
    restamp: list[str] = Field(default_factory=list)
    # What the run did, filled by the executor for live runs (absent for `plan`).
    outcome: dict[str, Any] | None = None
    # When this plan drains nothing only because time must pass: the first drain once it has (`core.preview`).
    preview: PreviewModel | None = None
    # Sentences about the input a person should see: configured pools no node carries, nodes without
    # the pool label, a snapshot without PodDisruptionBudgets, a configuration source passed over.
    warnings: list[str] = Field(default_factory=list)
    # Where the configuration came from: "--config FILE", "firestore:collection/document",
    # "COMPACTOR_CONFIG" or "defaults"; absent where the caller did not say.
    config_source: str | None = Field(None, serialization_alias="configSource")
    # The currency of every price in the report (the price table's).
    currency: str = "USD"
    # Node replacement under way or started by this run; absent when there is none.
    replacement: ReplacementModel | None = Field(None, exclude_if=lambda value: value is None)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def to_model(
    plan: Plan,
    *,
    outcome: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
    config_source: str | None = None,
    mode: Mode | None = None,
) -> ReportModel:
    """The report of `plan`; `mode` None: a live run's, dry or not as the plan says."""
    decision = plan.decision
    if mode is None:
        mode = "dry-run" if plan.dry_run else "run"
    return ReportModel(
        schema_version=SCHEMA_VERSION,
        mode=mode,
        decision=DecisionModel(
            action=decision.action,
            node=decision.node,
            pool=decision.pool,
            reason=decision.reason,
            evictions=list(decision.evictions),
            placements=dict(decision.placements),
            held=decision.held,
            restarts=dict(decision.restarts),
            savings_per_hour=_savings(plan),
        ),
        marks=MarksModel(add=list(plan.marks_add), remove=list(plan.marks_remove)),
        replaceable=MarksModel(add=list(plan.replaceable_add), remove=list(plan.replaceable_remove)),
        nodes=[
            NodeModel(
                name=node.name,
                pool=node.pool,
                cpu_ratio=_ratio(node.cpu_ratio),
                memory_ratio=_ratio(node.memory_ratio),
                underutilized=node.underutilized,
                marked_since=format_stamp(node.marked_since) if node.marked_since else None,
                candidate=node.candidate,
                blockers=list(node.blockers),
                ready=node.ready,
                cordoned=node.cordoned,
                pods=node.pods,
                pods_to_move=node.pods_to_move,
                single_replica_pods=[
                    SingleReplicaModel(pod=one.pod, owner=one.owner, action=one.action, reason=one.reason)
                    for one in node.single_replicas
                ]
                if node.single_replicas
                else None,
                price_per_hour=_money(node.price_per_hour),
                replacement=node.replacement,
            )
            for node in plan.nodes
        ],
        pools=[
            PoolModel(
                name=pool.name,
                enabled=pool.enabled,
                configured=pool.configured,
                nodes=pool.nodes,
                underutilized=pool.underutilized,
                lower_bound_nodes=pool.lower_bound_nodes,
                excess_nodes=pool.excess_nodes,
                consolidation_threshold=pool.compute_class.threshold if pool.compute_class else None,
                threshold_source=pool.compute_class.source if pool.compute_class else None,
                compute_class=pool.compute_class.compute_class if pool.compute_class else None,
                left_to_autoscaler=pool.compute_class.left_to_autoscaler if pool.compute_class else None,
                price_per_hour=_money(pool.price_per_hour),
                cost_lower_bound_per_hour=_money(pool.cost_lower_bound_per_hour),
                price_note=pool.price_note,
            )
            for pool in plan.pools
        ],
        dry_run=plan.dry_run or mode == "plan",
        now=format_stamp(plan.now),
        held_by=held_by(plan),
        awaiting_removal=list(plan.awaiting_removal),
        soft_taints=MarksModel(add=list(plan.soft_taints_add), remove=list(plan.soft_taints_remove)),
        reservations=MarksModel(add=list(plan.decision.reserved), remove=list(plan.reservations_remove)),
        scale_down_steering=SteeringModel(
            nodes=list(plan.steered_nodes), add=list(plan.deletion_costs_add), remove=list(plan.deletion_costs_remove)
        ),
        path=_path_model(plan),
        more_rollbacks=[{"node": node, "reason": reason} for node, reason in plan.more_rollbacks],
        restamp=list(plan.restamp),
        outcome=outcome,
        preview=_preview_model(plan.preview),
        # Each sentence once: the input's checks and the planner may say the same (a target pool not used).
        warnings=list(
            dict.fromkeys(
                [
                    *warnings,
                    *([plan.surge_note] if plan.surge_note else []),
                    *plan.compute_class_warnings,
                    *plan.price_warnings,
                ]
            )
        ),
        config_source=config_source,
        currency=plan.currency,
        replacement=_replacement_model(plan.replacement),
    )


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _savings(plan: Plan) -> float | None:
    """A drain saves its node's price per hour (once the Cluster Autoscaler removes it)."""
    decision = plan.decision
    if decision.action not in ("drain", "continue-drain") or decision.node is None:
        return None
    price = next((node.price_per_hour for node in plan.nodes if node.name == decision.node), None)
    return _money(price)


def _replacement_model(replacement: Replacement | None) -> ReplacementModel | None:
    if replacement is None:
        return None
    return ReplacementModel(
        step=replacement.step,
        placeholder=replacement.placeholder,
        placeholders=list(replacement.all_placeholders),
        nodes=list(replacement.nodes),
        target=replacement.target_pool,
        target_pool=None if replacement.machine_type_target else replacement.target_pool,
        new_nodes=replacement.new_nodes,
        spot=pricing.is_spot(dict(replacement.node_selector)),
        machine_type=replacement.machine_type,
        zone=replacement.zone,
        price_per_hour=_money(replacement.price_per_hour),
        removed_price_per_hour=_money(replacement.removed_price_per_hour),
        savings_per_hour=_money(replacement.savings_per_hour),
        reason=replacement.reason,
        failed=list(replacement.failed),
    )


def _preview_model(preview: Preview | None) -> PreviewModel | None:
    if preview is None:
        return None
    return PreviewModel(
        node=preview.node, pool=preview.pool, earliest=format_stamp(preview.earliest), reason=preview.reason
    )


def _path_model(plan: Plan) -> PathModel | None:
    path = plan.path
    if path is None:
        return None
    return PathModel(
        steps=[
            PathStepModel(node=step.node, pool=step.pool, pods_moved=step.pods_moved, nodes_after=step.nodes_after)
            for step in path.steps
        ],
        reaches_lower_bound=path.reaches_lower_bound,
        stopped_because=path.stopped_because,
        estimated_minutes=path.estimated_minutes,
        caveats=list(path.caveats),
    )


def held_by(plan: Plan) -> dict[str, str] | None:
    if plan.held_by is None:
        return None
    return {"kind": plan.held_by, "summary": BLOCKER_SUMMARY.get(plan.held_by, plan.held_by)}


def to_dict(
    plan: Plan,
    *,
    outcome: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
    config_source: str | None = None,
    mode: Mode | None = None,
) -> dict[str, Any]:
    model = to_model(plan, outcome=outcome, warnings=warnings, config_source=config_source, mode=mode)
    data = model.model_dump(by_alias=True)
    for optional in ("outcome", "configSource"):
        if data[optional] is None:
            del data[optional]
    return data


def to_json(
    plan: Plan,
    *,
    outcome: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
    config_source: str | None = None,
    mode: Mode | None = None,
) -> bytes:
    document = to_dict(plan, outcome=outcome, warnings=warnings, config_source=config_source, mode=mode)
    return orjson.dumps(document, option=orjson.OPT_INDENT_2)


# -- the table -----------------------------------------------------------------------------


def _marked_for(marked_since: datetime | None, now: datetime) -> str:
    return "-" if marked_since is None else human(seconds_between(marked_since, now))


# The table fits a terminal of this many columns: a node's first blocker that would reach past it
# goes on the line under the node (wrapped), and the sentences below the table are wrapped. `--json` has
# every word; the table lists at most NAMES_SHOWN names where a list can be long.
WIDTH = 120
NAMES_SHOWN = 10


def _wrap(text: str, *, indent: str = "  ", first: str = "") -> list[str]:
    """`text` in lines of at most WIDTH columns (a word longer than that stays whole), the later ones indented."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _columns(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _enabled_cell(pool: PoolReport) -> str:
    if not pool.enabled:
        # Why not, when nobody said "enabled": false: a pool the configuration does not name (is its name in
        # the configuration misspelt?). Nodes without the pool label say so in the POOL column.
        return "no" if pool.configured or not pool.name else "no (not in the configuration)"
    if pool.compute_class is not None and pool.compute_class.left_to_autoscaler is not None:
        return "left to the autoscaler (ComputeClass threshold)"
    return "yes"


def to_table(plan: Plan, *, notes: Sequence[str] = ()) -> str:
    """The plan as a table; `notes`, sentences a person must read first (no configuration at all), above it."""
    lines: list[str] = []
    for note in notes:
        lines += [*_wrap(note[:1].upper() + note[1:]), ""]
    per_hour = f"{plan.currency}/H"
    pool_rows = [["POOL", "ENABLED", "NODES", "UNDERUTILIZED", "LOWER BOUND", "EXCESS", per_hour, f"BOUND {per_hour}"]]
    for pool in plan.pools:
        pool_rows.append(
            [
                pool.name or "(no pool label)",
                _enabled_cell(pool),
                str(pool.nodes),
                str(pool.underutilized),
                str(pool.lower_bound_nodes),
                str(pool.excess_nodes),
                _price(pool.price_per_hour),
                _price(pool.cost_lower_bound_per_hour),
            ]
        )
    lines += _columns(pool_rows, right={2, 3, 4, 5, 6, 7})
    lines.append("")
    node_rows = [["NODE", "POOL", "CPU", "MEM", per_hour, "MARKED FOR", "CANDIDATE"]]
    first_blockers = ["FIRST BLOCKER"]
    for node in plan.nodes:
        node_rows.append(
            [
                node.name,
                node.pool or "-",
                percent(node.cpu_ratio, missing="-"),
                percent(node.memory_ratio, missing="-"),
                _price(node.price_per_hour),
                _marked_for(node.marked_since, plan.now),
                "yes" if node.candidate else "no",
            ]
        )
        first_blockers.append(node.blockers[0] if node.blockers else "-")
    node_lines = _columns(node_rows, right={2, 3, 4, 5})
    before_blocker = max(len(line) for line in node_lines) + 2
    room = WIDTH - before_blocker
    for line, blocker in zip(node_lines, first_blockers, strict=True):
        if len(blocker) <= room:
            lines.append(f"{line.ljust(before_blocker)}{blocker}")
        else:  # a reason longer than its column reads better whole, under its node, than cut
            lines.append(line)
            lines += _wrap(blocker, indent="    ", first="    ")
    lines.append("")
    if plan.marks_add or plan.marks_remove:
        lines += _wrap(f"Marks: add {_names(plan.marks_add)}; remove {_names(plan.marks_remove)}")
    if plan.replaceable_add or plan.replaceable_remove:
        lines += _wrap(
            f"Replaceable since (rule 10's wait): add {_names(plan.replaceable_add)}; "
            f"remove {_names(plan.replaceable_remove)}"
        )
    decision = plan.decision
    subject = f" {decision.node}" if decision.node else ""
    dry = " (dry run: nothing is written)" if plan.dry_run else ""
    lines += _wrap(f"Decision: {decision.action}{subject}{dry}. {decision.reason}.")
    if plan.replacement is not None:
        replacement = plan.replacement
        lines += _wrap(
            f"Node replacement ({replacement.step}, {_names(replacement.all_placeholders)}): "
            f"{_names(replacement.nodes)} -> {replacement.new_nodes} new node(s) of "
            f"{'machine type' if replacement.machine_type_target else 'pool'} {replacement.target_pool}. "
            f"{replacement.reason}."
        )
    for name, note in ((node.name, node.replacement) for node in plan.nodes if node.replacement):
        lines += _wrap(f"Replacement of {name}: {note}.")
    held = held_by(plan)
    if held is not None:
        lines += _wrap(f"Held back by: {held['kind']} ({held['summary']}).")
    if plan.preview is not None:
        preview = plan.preview
        lines += _wrap(f"Preview (the first drain once the waits are over): {preview.reason}.")
    for given_back, reason in plan.more_rollbacks:
        lines += _wrap(f"Also given back: {given_back}. {reason}.")
    if plan.restamp:
        lines += _wrap(f"drain-started-at in the future, rewritten to now: {_names(plan.restamp)}.")
    if plan.awaiting_removal:
        lines += _wrap(f"Awaiting removal by the Cluster Autoscaler: {_names(plan.awaiting_removal)}.")
    lines += _single_replica_lines(plan)
    if plan.path is not None:
        lines += _path_lines(plan.path)
    if plan.steered_nodes or plan.deletion_costs_remove:
        lines += _wrap(
            f"Scale-downs steered to: {_names(plan.steered_nodes)} "
            f"(pod-deletion-cost on {len(plan.deletion_costs_add)} more pod(s), "
            f"taken back from {len(plan.deletion_costs_remove)})."
        )
    return "\n".join(lines) + "\n"


def _price(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _single_replica_lines(plan: Plan) -> list[str]:
    """The decision's pods moved by a rolling restart, and why the node's other single-replica pods are not."""
    lines: list[str] = []
    if plan.surge_note:
        lines += _wrap(f"Rolling restarts: {plan.surge_note}.")
    decision = plan.decision
    node = next((node for node in plan.nodes if node.name == decision.node), None)
    if node is None or not node.single_replicas:
        return lines
    moved = [f"{one.pod} ({one.owner})" for one in node.single_replicas if one.action != "evict"]
    others = [one for one in node.single_replicas if one.action == "evict"]
    lines += _wrap(f"Moved by a rolling restart instead of an eviction: {', '.join(moved) or 'none'}.")
    for one in others[:NAMES_SHOWN]:
        lines += _wrap(f"{one.pod} follows the normal rules: {one.reason}.", first="  ", indent="    ")
    if len(others) > NAMES_SHOWN:
        lines += _wrap(f"and {len(others) - NAMES_SHOWN} more single-replica pod(s) (--json lists all).", first="  ")
    return lines


def _path_lines(path: ConsolidationPath) -> list[str]:
    if not path.steps:
        return _wrap(f"Path: no drain would follow ({path.stopped_because}).")
    goal = "reaches the lower bound" if path.reaches_lower_bound else f"then {path.stopped_because}"
    duration = human(path.estimated_minutes * 60)
    lines = _wrap(f"Path if nothing changed: {len(path.steps)} drain(s), about {duration}; {goal}.")
    for number, step in enumerate(path.steps, start=1):
        moved = f"{step.pods_moved} pod(s) moved; pool {step.pool} then has {step.nodes_after} node(s)"
        lines += _wrap(f"{number}. {step.node} ({moved})", first="  ", indent="     ")
    for caveat in path.caveats:
        lines += _wrap(f"But: {caveat}.", first="  ", indent="    ")
    return lines


def outcome_lines(outcome: dict[str, Any]) -> str:
    """What a live run did, in a few lines under the table."""
    if outcome.get("dryRun"):
        return "Dry run: nothing was written.\n"
    lines = [f"Marks written: {len(outcome['marksAdded'])} added, {len(outcome['marksRemoved'])} removed."]
    if outcome.get("deletionCostsAdded") or outcome.get("deletionCostsRemoved"):
        lines.append(
            f"Pod-deletion-costs written: {len(outcome['deletionCostsAdded'])} added, "
            f"{len(outcome['deletionCostsRemoved'])} taken back."
        )
    if outcome.get("stale"):
        lines.append(f"Not started: {outcome['stale']}.")
    if outcome.get("drainStarted"):
        lines.append("Drain started: the node is cordoned.")
    if outcome.get("evicted") or outcome.get("waiting"):
        lines.append(f"Evicted {len(outcome['evicted'])} pod(s); {len(outcome['waiting'])} still waiting.")
    if outcome.get("restarted") or outcome.get("movedByRestart"):
        lines.append(
            f"Rolling restarts: {len(outcome.get('restarted') or ())} Deployment(s) restarted; "
            f"{len(outcome.get('movedByRestart') or ())} pod(s) moved without an eviction."
        )
    if outcome.get("held"):
        lines.append(f"The drain waits: {outcome['held']}.")
    if outcome.get("interrupted"):
        lines.append(f"Evictions stopped: {outcome['interrupted']}.")
    if outcome.get("drainCompleted"):
        lines.append("Drain completed: the node stays cordoned for the Cluster Autoscaler.")
    if outcome.get("rolledBack"):
        lines.append(f"Rolled back (uncordoned): {', '.join(outcome.get('givenBack') or ()) or 'the node'}.")
    for reason in outcome.get("skipped") or ():
        lines.append(f"Skipped: {reason}.")
    return "\n".join(lines) + "\n"


def _names(names: tuple[str, ...]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown if len(names) <= NAMES_SHOWN else f"{shown} and {len(names) - NAMES_SHOWN} more (--json lists all)"
