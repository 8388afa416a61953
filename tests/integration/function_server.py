"""A real functions-framework server (gunicorn) serving `main.py` on 127.0.0.1, for tests that need real HTTP.

Other test runs share this machine and pick free ports the same way, so a port found free can be
taken before gunicorn binds it: gunicorn then retries and exits, and a client would talk to
someone else's server. `serve` waits until the port's listening socket is one of this
process's own (Linux `/proc`), and tries another port otherwise. It never listens on anything
but loopback, and the caller's `with` ends the process group it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 30
ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def serve(target: str, env: Mapping[str, str]) -> Iterator[str]:
    """`python -m functions_framework --target=TARGET` on a free loopback port; yields its base URL."""
    problems: list[str] = []
    for _ in range(ATTEMPTS):
        port = free_port()
        command = [sys.executable, "-m", "functions_framework", f"--target={target}", f"--source={ROOT / 'main.py'}"]
        # A file, not a pipe: the function logs a line per event, and a pipe nobody reads fills up.
        with tempfile.TemporaryFile() as output:
            process = subprocess.Popen(
                [*command, "--host=127.0.0.1", f"--port={port}"],
                cwd=ROOT,
                env=dict(env),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                problem = _wait_until_listening(process, port, output)
                if problem is None:
                    yield f"http://127.0.0.1:{port}/"
                    return
                problems.append(problem)
            finally:
                _stop(process)
    raise AssertionError(f"functions-framework did not start in {ATTEMPTS} attempts: {problems}")


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, output: IO[bytes]) -> str | None:
    """None once the process listens on `port`; otherwise why not."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output.seek(0)
            return f"port {port}: exited with {process.returncode}: {output.read()[-500:].decode(errors='replace')}"
        if _listening_inode(port) in _socket_inodes(process.pid):
            return None
        time.sleep(0.2)
    return f"port {port}: not listening after {START_SECONDS} s"


def _listening_inode(port: int) -> str | None:
    """The inode of the socket listening on 127.0.0.1:port, from /proc/net/tcp."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == wanted and fields[3] == "0A":  # 0A: LISTEN
                return fields[9]
    return None


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[len("socket:[") : -1])
    return inodes


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
