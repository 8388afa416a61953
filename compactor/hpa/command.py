"""`python -m compactor hpa`: one HPA floor run against a live cluster, or a plan from saved files.

`hpa --snapshot FILE [--metrics FILE]` plans offline from what
`kubectl get hpa,replicasets -A -o json` prints and a JSON object mapping
each query's text to its value: a number, or the answer Prometheus gave
(`curl 'http://prometheus/api/v1/query?query=...'`). Offline runs write nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import orjson

from compactor.errors import EXIT_OK, BadInputError
from compactor.hpa import planner, reading, report, results
from compactor.hpa import settings as hpa_settings
from compactor.hpa.model import Answer
from compactor.settings import arguments, jsonfiles

# A query's answer is a few hundred bytes; even thousands of HPAs stay far below this.
MAX_METRICS_BYTES = 64 << 20


def add_parser(commands: Any) -> None:
    hpa = commands.add_parser(
        "hpa", help="raise HPA minReplicas to estafette-k8s-hpa-scaler's floors (live, or offline from files)"
    )
    where = arguments.cluster_arguments(hpa)
    where.add_argument(
        "--snapshot", metavar="FILE", help="plan offline from what `kubectl get hpa,replicasets -A -o json` prints"
    )
    hpa.add_argument("--metrics", metavar="FILE", help="with --snapshot: JSON object of query text -> value or answer")
    hpa.add_argument(
        "--config",
        metavar="FILE",
        help="configuration JSON (its dryRun applies); wins over Firestore and COMPACTOR_CONFIG",
    )
    hpa.add_argument("--dry-run", action="store_true", help="plan and report, write nothing")
    hpa.add_argument("--json", action="store_true", help="print the JSON report instead of the table")


def run(args: argparse.Namespace) -> int:
    if args.snapshot:
        return _offline(args)
    if args.metrics:
        raise BadInputError("--metrics: only with --snapshot (a live run asks Prometheus)")
    from compactor import logs
    from compactor import service as compactor_service
    from compactor.hpa import service

    # stdout carries the report; `cli.main` prints a failed or skipped run's error itself, once.
    logs.configure(sys.stderr, leave_out=frozenset({"run-failed", "run-skipped"}))
    connector = compactor_service.connector_from(os.environ, kubeconfig=args.kubeconfig, gke_cluster=args.gke)
    result = service.run(
        os.environ, connector=connector, config_file=args.config, force_dry_run=args.dry_run, gke_cluster=args.gke
    )
    _print(result.plan, result.report, args.json)
    return EXIT_OK


def _offline(args: argparse.Namespace) -> int:
    settings = hpa_settings.from_env(os.environ)
    cluster = reading.read_file(args.snapshot)
    wanted = planner.queries(cluster, settings)
    values = read_metrics(args.metrics) if args.metrics else {}
    answers = {
        query: values.get(query.query) or Answer.failed(f"no value for it in {args.metrics or 'the --metrics file'}")
        for query in wanted
    }
    plan = planner.plan(cluster, settings, answers)
    _print(plan, report.to_dict(plan, dry_run=True), args.json)
    return EXIT_OK


def read_metrics(path: str) -> dict[str, Answer]:
    """`{"query text": 12.5 | {"status": "success", "data": ...}}` -> the answer for each query text."""
    document = jsonfiles.read_object(
        path, what="metrics file", limit=MAX_METRICS_BYTES, error=BadInputError, hint=" of query text -> value"
    )
    return {str(text): results.from_document(value) for text, value in document.items()}


def _print(plan: Any, document: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(report.to_table(plan))
