"""Re-record the shipped scenarios' outputs that `test_recorded` compares against.

    python -m tests.simulation.record [NAME ...]

Simulates each scenario of examples/scenarios/ (or only those named, by file stem) for its whole day and
writes `simulate --json`'s output without the wall-clock fields to tests/simulation/recorded/NAME.json.
docs/testing.md says when to re-record: only when a change is meant to move the figures.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.simulation import shipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation.record", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="scenario file stems (default: every scenario)")
    args = parser.parse_args(argv)
    known = {path.stem: path for path in shipped.SCENARIOS}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        parser.error(f"no such scenario: {', '.join(unknown)} (known: {', '.join(known)})")
    shipped.RECORDED_DIR.mkdir(exist_ok=True)
    for name in args.names or list(known):
        started = time.monotonic()
        target = shipped.recorded_path(known[name])
        target.write_bytes(shipped.recordable(shipped.results(known[name])))
        print(f"{name}: {time.monotonic() - started:.1f} s -> {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
