"""`python -m tests.e2e.gke_run`: a run as on GKE (`python -m compactor run --gke CLUSTER --json`), where GKE is
tests/fakegke's stand-in.

The e2e control plane has no GKE API, and what GKE says of a cluster (its node pools' autoscaling, whether
node auto-provisioning creates pools) reaches a run only through `compactor.gcp.gke.connect`. This runs that
same path, `gke.connect(...)` then `service.run(...)` as `compactor.cli` does for `--gke`, with two things
replaced, as tests/integration/test_gke.py replaces them: the GKE API client talks to the stand-in at
`--gke-api`, and the Google credentials hand out node-compactor's e2e token (kube-apiserver knows it as the
service account `controlplane.COMPACTOR_USER`, as GKE knows the function's). The stand-in describes the e2e
cluster: its IP endpoint is the local kube-apiserver and its CA the control plane's, so the endpoint mode is
`ip`.

Prints the report on stdout (JSON), warnings and errors on stderr, and exits as `compactor run` does.
Never used outside the e2e tests.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from typing import Any

import google.auth.credentials
import orjson

from compactor import cli, logs, service
from compactor.errors import EXIT_OK, CompactorError, exit_code
from compactor.gcp import gke
from tests import fakegke


class TokenCredentials(google.auth.credentials.Credentials):
    """Google credentials whose access token is a fixed string, valid for the next hour at each refresh."""

    def __init__(self, token: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # google-auth leaves it unannotated
        self._fixed = token

    def refresh(self, request: Any) -> None:
        self.token = self._fixed
        # google-auth keeps expiry as naive UTC.
        self.expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.gke_run", description=__doc__.splitlines()[0])
    parser.add_argument("--gke", required=True, help="projects/P/locations/L/clusters/C")
    parser.add_argument("--gke-api", required=True, help="the stand-in's URL (tests/fakegke)")
    parser.add_argument("--token-file", required=True, help="the Google access token the credentials hand out")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    logs.configure(sys.stderr, leave_out=logs.SHOWN_BY_THE_COMMAND_LINE)
    with open(args.token_file, encoding="utf-8") as stream:
        credentials = TokenCredentials(stream.read().strip())

    def connect() -> service.ClusterConnection:
        connection = gke.connect(
            args.gke, endpoint_mode="ip", credentials=credentials, cluster_manager=fakegke.client(args.gke_api)
        )
        return service.ClusterConnection(connection.api_client, connection.pool_autoscaling, connection.close)

    try:
        result = service.run(os.environ, connector=connect, config_file=args.config)
    except CompactorError as error:
        if error.report is not None:
            cli.warn(error.report.get("warnings") or ())
            sys.stdout.buffer.write(orjson.dumps(error.report, option=orjson.OPT_INDENT_2) + b"\n")
        for problem in error.problems:
            print(f"error: {cli.one_line(problem)}", file=sys.stderr)
        return exit_code(error)
    cli.warn(result.report.get("warnings") or ())
    sys.stdout.buffer.write(orjson.dumps(result.report, option=orjson.OPT_INDENT_2) + b"\n")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
