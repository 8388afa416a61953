"""Serve a generated cluster from the fake API server until interrupted.

    python -m tests.fakeapi --nodes 5000 --pods-per-node 30 --kubeconfig /tmp/fake.kubeconfig

For benchmarks that should not share a process (and its garbage collector) with
the fake, and for trying `python -m compactor run --kubeconfig ...` by hand.
Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse

from tests.fakeapi import builders
from tests.fakeapi.server import FakeApiServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakeapi", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default="test-token", help="bearer token; empty turns authentication off")
    parser.add_argument("--kubeconfig", help="also write a kubeconfig for the server to this path")
    arguments = parser.parse_args(argv)

    api = FakeApiServer(token=arguments.token or None, port=arguments.port).start()
    api.add_all(builders.node(f"gke-fake-default-pool-{index:05d}") for index in range(arguments.nodes))
    api.add_all(
        builders.pod(
            f"app{index % 500}-{index:07d}",
            namespace=f"team-{index % arguments.namespaces}",
            node=f"gke-fake-default-pool-{index % arguments.nodes:05d}",
        )
        for index in range(arguments.nodes * arguments.pods_per_node)
    )
    if arguments.kubeconfig:
        api.write_kubeconfig(arguments.kubeconfig)
    print(api.url, flush=True)

    api.serve_until_signalled()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
