"""Serve a saved cluster (a kubectl `List`, e.g. from `bench.synth`) from the fake API server until killed.

    python bench/serve_fake_cluster.py --snapshot bench/out/live/snapshot-5000.json --kubeconfig F

For `bench/live_scale.py`: the fake runs in this process of its own, so its
memory and CPU are not counted in the measured client's. Nodes, pods and
PodDisruptionBudgets of the List are stored (other kinds are skipped), the
kubeconfig is written, and only then is the server's URL printed on stdout:
one line, the signal that it is ready. Listens on 127.0.0.1 only. Stops on
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/serve_fake_cluster.py`
    sys.path.insert(0, str(REPO))

from tests.fakeapi.server import FakeApiServer  # noqa: E402

SERVED_KINDS = frozenset({"Node", "Pod", "PodDisruptionBudget"})
KIND_ORDER = {"Node": 0, "PodDisruptionBudget": 1, "Pod": 2}  # pods after the nodes they are bound to


def load_items(snapshot: Path) -> list[dict[str, object]]:
    """The List's items of the kinds the compactor reads, nodes first."""
    gc.disable()  # a million fresh dicts and no cycles: the collector would only rescan them
    try:
        # msgspec, not orjson: orjson refuses a document over about 2 GiB (10,000 nodes is 2.2 GB).
        document = msgspec.json.decode(snapshot.read_bytes())
    finally:
        gc.enable()
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise SystemExit(f"{snapshot}: not a kubectl List (no items)")
    kept = [item for item in items if isinstance(item, dict) and item.get("kind") in SERVED_KINDS]
    kept.sort(key=lambda item: KIND_ORDER[str(item["kind"])])
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/serve_fake_cluster.py", description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", type=Path, required=True, metavar="FILE", help="a kubectl List (JSON)")
    parser.add_argument("--kubeconfig", type=Path, required=True, metavar="FILE", help="write a kubeconfig here")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--token", default="bench-token", help="bearer token; empty turns authentication off")
    arguments = parser.parse_args(argv)

    started = time.perf_counter()
    items = load_items(arguments.snapshot)
    api = FakeApiServer(token=arguments.token or None, port=arguments.port).start()
    stored = api.add_all(items)
    del items  # the fake owns the dicts now
    api.write_kubeconfig(arguments.kubeconfig)
    print(f"{api.url} stored={stored} load_seconds={time.perf_counter() - started:.1f}", file=sys.stderr, flush=True)
    print(api.url, flush=True)

    api.serve_until_signalled()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
