"""`python -m compactor` (or `node-compactor`): plan from a saved snapshot, run against a live cluster,
simulate a day, run the HPA floor, or remove every trace node-compactor left in a cluster.

Exit 0 when the run completed (whether or not it acted), 2 for bad input or
configuration (one message per problem on stderr; no subcommand: the usage),
1 for a failed run. Warnings about the input (`warning: ...`) go to stderr
too, and into the JSON report's `warnings`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

import orjson

import compactor
from compactor import report
from compactor.core import configcheck, path, planner, timing
from compactor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInputError, CompactorError, exit_code
from compactor.gcp import pricefile
from compactor.kube import integrity, snapshot
from compactor.settings import arguments
from compactor.settings import config as config_source

if TYPE_CHECKING:
    from compactor.simulation.model import Setup  # the simulator is imported only by `simulate`


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise BadInputError(message)


def build_parser() -> argparse.ArgumentParser:
    # Installed, the command is `node-compactor`; from a clone, `python -m compactor`.
    installed = os.path.basename(sys.argv[0]) == "node-compactor"
    prog = "node-compactor" if installed else "python -m compactor"
    parser = _Parser(prog=prog, description="Pack pods onto fewer GKE nodes.")
    parser.add_argument("--version", action="store_true", help="print node-compactor's version and exit")
    # Not `required`: with no subcommand `main` prints the usage itself (argparse would print one line).
    commands = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    plan = commands.add_parser("plan", help="plan from a saved cluster snapshot; touches no cluster")
    plan.add_argument(
        "--snapshot",
        required=True,
        metavar="FILE",
        help=(
            "what `kubectl get nodes,pods,poddisruptionbudgets -A -o json` prints (with "
            "deployments,replicasets,persistentvolumeclaims too for pools with surgeSingleReplicas)"
        ),
    )
    plan.add_argument("--config", metavar="FILE", help="configuration JSON (wins over COMPACTOR_CONFIG and Firestore)")
    plan.add_argument(
        "--now", metavar="RFC3339", help="the time to plan at, e.g. 2026-11-21T10:00:00Z or 2026-11-21 (default: now)"
    )
    plan.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    plan.add_argument(
        "--path-steps",
        type=int,
        metavar="N",
        help=(
            f"drains the consolidation path shows (default: up to {path.MAX_STEPS}, fewer on big clusters to keep "
            "planning within about a second; 0 leaves it and the preview out)"
        ),
    )

    run = commands.add_parser("run", help="one full run against a live cluster, exactly what the function does")
    arguments.cluster_arguments(run)
    run.add_argument(
        "--config",
        metavar="FILE",
        help="configuration JSON; wins over Firestore and COMPACTOR_CONFIG, which apply without it",
    )
    run.add_argument("--dry-run", action="store_true", help="plan and report, write nothing")
    run.add_argument("--json", action="store_true", help="print the JSON report instead of the table")

    simulate = commands.add_parser(
        "simulate",
        help="compare the Cluster Autoscaler alone, estafette's algorithm and node-compactor over a day",
        description="Simulate a day of each strategy on the same cluster and workload; print a table of the results.",
        # runner.STRATEGIES in its order, then the lower bound: the table's rows.
        epilog=(
            "strategies, each on its own copy of the same cluster and workload:\n"
            "  ca-alone                     the Cluster Autoscaler alone (GKE's balanced profile)\n"
            "  ca-optimize-utilization      the Cluster Autoscaler under GKE's optimize-utilization profile\n"
            "  gke-consolidation-threshold  the Cluster Autoscaler with a ComputeClass consolidationThreshold\n"
            "                               at each pool's cpu limit\n"
            "  gke-class-priorities         the same with ComputeClass priorities over the pools a pod may use,\n"
            "                               cheapest first, and active migration (optimizeRulePriority); only\n"
            "                               where some pod may use two pools or more\n"
            "  estafette                    estafette-k8s-node-compactor's algorithm as published\n"
            "  node-compactor               node-compactor with the configuration as given\n"
            "  node-compactor+surge         +surge: surgeSingleReplicas on in every enabled pool (single-replica\n"
            "                               Deployments moved by a rolling restart, not evicted)\n"
            "  node-compactor+threshold     +threshold: node-compactor on gke-consolidation-threshold's cluster,\n"
            "                               configured as docs/compute-class.md says\n"
            "  node-compactor+priorities    +priorities: node-compactor on gke-class-priorities' cluster, configured\n"
            "                               the same way; only where gke-class-priorities runs\n"
            "  lower-bound                  no strategy: per pool, the fewest nodes that hold every pod's requests\n"
            "\n"
            "The first four are native: what GKE does by configuration alone. More: docs/savings.md."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    start = simulate.add_mutually_exclusive_group(required=True)
    start.add_argument("--scenario", metavar="FILE", help="a scenario file (see examples/scenarios/)")
    start.add_argument(
        "--snapshot",
        metavar="FILE",
        help="start from what `kubectl get nodes,pods,poddisruptionbudgets -A -o json` prints",
    )
    simulate.add_argument("--config", metavar="FILE", help="node-compactor configuration (default: the scenario's)")
    simulate.add_argument("--hours", type=float, metavar="N", help="hours to simulate (default: the scenario's, or 24)")
    simulate.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw the node count, the cost per hour, pending pods and node-compactor's decisions over time "
        "(needs matplotlib)",
    )
    simulate.add_argument("--json", action="store_true", help="print the JSON results instead of the table")
    simulate.add_argument(
        "--wide", action="store_true", help="every column of the table (the default fits 120 columns)"
    )
    simulate.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="strategies simulated at once, each in its own process after the warm-up; 1 runs them one after "
        "the other in this process; the results are the same either way (default: the CPUs this process may use)",
    )

    prices = commands.add_parser(
        "prices", help="node prices per hour: the built-in table, or today's from the Cloud Billing Catalog API"
    )
    prices.add_argument(
        "--refresh", action="store_true", help="read today's Compute Engine prices (needs Google credentials)"
    )
    prices.add_argument("--out", metavar="FILE", help="with --refresh: the price file to write (docs/prices.md)")
    prices.add_argument("--currency", default="USD", metavar="CODE", help="with --refresh: ISO 4217 (default: USD)")
    prices.add_argument("--json", action="store_true", help="print the built-in table as a price file")

    from compactor.hpa import command as hpa_command  # the HPA floor job: its own arguments

    hpa_command.add_parser(commands)

    from compactor import cleanup  # removing every trace: its own arguments

    cleanup.add_parser(commands)
    return parser


DISTRIBUTION = "node-compactor"


def version(lookup: Callable[[str], str] = importlib.metadata.version) -> str:
    """node-compactor's version: the installed distribution's (`pip install`), else, run from a clone where
    nothing is installed, the source tree's `compactor.__version__` (a test keeps it pyproject.toml's)."""
    try:
        return lookup(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return compactor.__version__


def _read_firestore(document: str, database: str | None) -> str:
    from compactor.gcp import firestore  # only when the configuration lives there

    return firestore.read_config_document(document, database)


# A date alone: `--now 2026-11-21` is that day's midnight UTC (a time needs its zone, a date is read as UTC).
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    if _DATE.fullmatch(text.strip()):
        text = f"{text.strip()}T00:00:00Z"
    try:
        return timing.parse_rfc3339(text)
    except timing.NoTimeZoneError:
        raise BadInputError(f"--now: {text!r} has no time zone (add Z for UTC: {text.strip()}Z)") from None
    except timing.OutOfRangeError as error:
        raise BadInputError(f"--now: {error}") from None
    except ValueError:
        raise BadInputError(f"--now: {text!r} is not an RFC 3339 time (e.g. 2026-11-21T10:00:00Z)") from None


# `plan` alone runs without a configuration (to show utilization), and must say what that means.
NO_CONFIGURATION = (
    "no configuration was given, so every pool is off: nothing is marked or drained. Give one with --config FILE, "
    f"or set {config_source.ENV_CONFIG} (JSON text) or {config_source.ENV_FIRESTORE_DOCUMENT} "
    "(docs/configuration.md)"
)


def _plan(args: argparse.Namespace) -> int:
    now = parse_now(args.now)
    loaded = config_source.load_with_source(
        os.environ, config_file=args.config, required=False, read_firestore=_read_firestore
    )
    config = loaded.config
    if args.path_steps is not None and args.path_steps < 0:
        raise BadInputError(f"--path-steps: {args.path_steps} is negative (0 leaves the path out)")
    # The command ends once the report is printed, and reading and planning make no reference cycles:
    # the collector would only rescan the snapshot and the planner's indexes again and again.
    gc.disable()
    cluster = integrity.check_unique(snapshot.read_file(args.snapshot))
    warnings = [notice] if (notice := loaded.notice()) is not None else []
    if loaded.source == "defaults":
        warnings.append(NO_CONFIGURATION)
    warnings += integrity.check_kinds(cluster, args.snapshot)
    warnings += configcheck.for_snapshot(cluster, config)
    warn(warnings)
    prices = pricefile.for_config(config)
    if args.path_steps == 0:
        result = planner.plan(cluster, config, now=now, prices=prices)
    else:
        result = path.plan_with_path(cluster, config, now=now, max_steps=args.path_steps, prices=prices)
    if result.surge_note:  # the planner's own warning: the report lists it too
        warn([result.surge_note])
    warn(result.compute_class_warnings)  # the planner's, about ComputeClasses: the report lists them too
    warn([warning for warning in result.price_warnings if warning not in warnings])  # prices and replacement
    if args.json:
        sys.stdout.buffer.write(
            report.to_json(result, warnings=warnings, config_source=loaded.source, mode="plan") + b"\n"
        )
    else:
        notes = [NO_CONFIGURATION] if loaded.source == "defaults" else []
        sys.stdout.write(report.to_table(result, notes=notes))
    _last[:] = [cluster, result]
    return EXIT_OK


def warn(warnings: Sequence[str]) -> None:
    """Each warning about the input as one `warning:` line on stderr (the report lists them too)."""
    for warning in warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)


# The snapshot and plan of the last `plan`, kept past its return: `python -m compactor` then leaves
# with os._exit (`__main__`), without freeing millions of objects one by one (about 50 ms at 150,000
# pods). A caller in the same process holds one command's objects at most: the next one replaces them.
_last: list[object] = []


def _run(args: argparse.Namespace) -> int:
    from compactor import logs, service

    # stdout carries the report; errors and warnings are printed once, in `main`'s words and `warn`'s.
    logs.configure(sys.stderr, leave_out=logs.SHOWN_BY_THE_COMMAND_LINE)
    connector = service.connector_from(os.environ, kubeconfig=args.kubeconfig, gke_cluster=args.gke)
    try:
        result = service.run(os.environ, connector=connector, config_file=args.config, force_dry_run=args.dry_run)
    except CompactorError as error:
        if error.report is not None:
            warn(error.report.get("warnings") or ())
            if args.json:
                sys.stdout.buffer.write(orjson.dumps(error.report, option=orjson.OPT_INDENT_2) + b"\n")
        raise
    warn(result.report.get("warnings") or ())
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result.report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(report.to_table(result.plan) + report.outcome_lines(result.outcome.to_dict()))
    return EXIT_OK


def _simulate(args: argparse.Namespace) -> int:
    # Imported here: the simulator is no part of the function, and `plan`/`run` must not pay for it.
    from compactor.simulation import kubectl, plot, progress, runner, scenario
    from compactor.simulation import report as simulation_report

    if args.hours is not None and not 0 < args.hours <= 24 * 14:
        raise BadInputError(f"--hours: {args.hours:g} is not between 0 and 336")
    if args.jobs is not None and args.jobs < 1:
        raise BadInputError(f"--jobs: {args.jobs} is not 1 or more")
    jobs = args.jobs if args.jobs is not None else len(os.sched_getaffinity(0))
    if args.plot:
        plot.require()
        plot.check_path(args.plot)
    config = config_source.load({}, config_file=args.config) if args.config else None
    if args.scenario:
        setup = scenario.load(args.scenario, config=config)
        if args.hours is not None:
            setup = scenario.with_hours(setup, args.hours)
    else:
        setup = kubectl.load(args.snapshot, config=config, hours=args.hours or 24.0)
    # Every pool of a simulated cluster is known: a target pool that is none of them is a mistake, not a pool
    # to come (DESIGN "Node replacement").
    where = "the scenario" if args.scenario else "the snapshot's cluster"
    problems = configcheck.unknown_target_pools(setup.config, [pool.name for pool in setup.pools], where)
    created = [pool.machine_type for pool in setup.pools if pool.auto_created and pool.machine_type]
    problems += configcheck.unknown_machine_types(setup.config, created, where)
    if problems:
        raise BadInputError(problems[0], problems)
    warn(simulation_warnings(setup, args.snapshot))
    bar = progress.Bar(
        sys.stderr,
        start=setup.start,
        hours=setup.hours,
        warmup_hours=setup.warmup_hours,
        strategies=runner.applicable(setup),
    )
    try:
        results = runner.run(setup, progress=bar.update, jobs=jobs)
    finally:
        bar.close()
    if args.plot:
        plot.write(results, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.json:
        sys.stdout.buffer.write(simulation_report.to_json(results) + b"\n")
    else:
        sys.stdout.write(simulation_report.to_table(results, wide=args.wide))
    return EXIT_OK


def _prices(args: argparse.Namespace) -> int:
    from compactor.core.prices import pricing

    if not args.refresh:
        if args.out is not None or args.currency != "USD":
            raise BadInputError("--out and --currency go with --refresh (the built-in table: --json > FILE)")
        if args.json:
            sys.stdout.buffer.write(pricing.to_json(pricing.BUILT_IN))
            return EXIT_OK
        table = pricing.BUILT_IN
        families = sorted({family for family, _, _ in table.rates})
        accelerators = sorted({accelerator for accelerator, _, _ in table.gpus})
        regions = sorted({region for _, region, _ in table.rates})
        sys.stdout.write(
            f"Built-in prices as of {table.as_of} ({table.currency} per hour, list prices without discounts)\n"
            f"Source: {table.source}\nFamilies ({len(families)}): {', '.join(families)}\n"
            f"GPUs ({len(accelerators)}): {', '.join(accelerators)}\n"
            f"Regions ({len(regions)}): {', '.join(regions)}\n"
            "Spot prices change up to daily: `prices --refresh --out FILE`, then set priceFile (docs/prices.md).\n"
        )
        return EXIT_OK
    if args.out is None or args.json:
        raise BadInputError("--refresh writes a price file: give --out FILE (and no --json)")
    if not re.fullmatch(r"[A-Z]{3}", args.currency):
        raise BadInputError(f"--currency: {args.currency!r} is not an ISO 4217 code such as USD or EUR")
    from compactor.gcp import billing  # only here: it brings the Cloud Billing client

    today = datetime.now(UTC).date().isoformat()
    reading = billing.read_catalog(as_of=today, currency=args.currency, endpoint=os.environ.get(billing.ENV_ENDPOINT))
    try:
        with open(args.out, "wb") as out:
            out.write(pricing.to_json(reading.table))
    except OSError as error:
        raise BadInputError(f"--out: cannot write {args.out}: {error.strerror or error}") from error
    print(f"{reading.summary()}; wrote {args.out}", file=sys.stderr)
    return EXIT_OK


def simulation_warnings(setup: Setup, snapshot_file: str | None) -> list[str]:
    """The configuration's pools that the simulated cluster lacks; for a snapshot, its nodes without the
    pool label and a missing PodDisruptionBudget list."""
    label = setup.config.pool_label
    unlabeled = [
        str(node["metadata"]["name"])
        for node in setup.initial_nodes
        if label not in (node["metadata"].get("labels") or {})
    ]
    found = list(configcheck.pool_warnings(setup.config, [pool.name for pool in setup.pools], unlabeled))
    if snapshot_file is not None and not setup.pdbs:
        found.append(integrity.no_pdbs_warning(snapshot_file))
    from compactor.simulation import prices  # only `simulate` reaches here

    found += prices.warnings(setup)  # the report lists them too: a pool with no price makes every cost null
    return found


def one_line(problem: str) -> str:
    """A problem as one line: a line break or other control character in a name from the input is shown
    escaped, so each problem stays one `error:` line and input cannot forge lines of its own."""
    if problem.isprintable():
        return problem
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in problem)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.version:
            print(f"{DISTRIBUTION} {version()}")
            return EXIT_OK
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        if args.command == "plan":
            return _plan(args)
        if args.command == "run":
            return _run(args)
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "prices":
            return _prices(args)
        if args.command == "hpa":
            from compactor.hpa import command as hpa_command

            return hpa_command.run(args)
        if args.command == "cleanup":
            from compactor import cleanup

            return cleanup.command(args)
        raise BadInputError(f"unknown command {args.command}")
    except CompactorError as error:
        for problem in error.problems:
            print(f"error: {one_line(problem)}", file=sys.stderr)
        return exit_code(error)
    except KeyboardInterrupt:
        return EXIT_FAILED


def console() -> NoReturn:
    """The `node-compactor` command (`[project.scripts]`) and `python -m compactor`: `main`, then leave at once.

    A planned 150,000-pod cluster is millions of small objects; freeing them one by one at
    interpreter exit takes seconds and serves no one. Flush what was written and leave.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
