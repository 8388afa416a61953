"""The strategies of a run in worker processes, each forked from the warmed-up cluster.

`runner.run` with `jobs` above 1 hands its strategies to `run_all`: one worker process per task, at most
`jobs` at once, each forked from the parent after the warm-up, so it inherits the warmed cluster as it lies
in memory instead of receiving it pickled. What comes back through the worker's pipe is small: the task's
value (a strategy's result: its recorder and series) and its progress, which the parent relays to the
caller's `Progress` as it arrives. Values come back in the order of the tasks, whatever order the workers
finish in.

A worker that raises sends its exception back, and it is raised here with the worker's traceback as a note;
one that ends without a word (killed, out of memory) is a `WorkerError` naming its task. Either way the
other workers are stopped: a failure never leaves the parent waiting.

Workers are only ever forked, never spawned: a spawned worker would have to be sent the cluster pickled.
"""

from __future__ import annotations

import multiprocessing
import pickle
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

from compactor.errors import WorkerError

T = TypeVar("T")
Progress = Callable[[str, float], None]
# A task runs in a worker with a progress callback that reports to the parent; its value is sent back.
Task = Callable[[Progress], T]

_PROGRESS, _DONE, _FAILED = "progress", "done", "failed"


@dataclass
class _Running(Generic[T]):
    index: int
    name: str
    process: BaseProcess
    value: list[T] = field(default_factory=list)  # the task's value once received (a list: it may be None)


def run_all(tasks: Sequence[tuple[str, Task[T]]], jobs: int, progress: Progress | None = None) -> list[T]:
    """Each task's value, each computed in a forked worker, `jobs` at a time; `progress` hears every worker."""
    context = multiprocessing.get_context("fork")
    queue = deque(enumerate(tasks))
    values: dict[int, T] = {}
    running: dict[Connection, _Running[T]] = {}
    try:
        while queue or running:
            while queue and len(running) < max(1, jobs):
                index, (name, task) = queue.popleft()
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(target=_work, args=(task, writer), name=f"simulate-{name}", daemon=True)
                process.start()
                writer.close()  # the worker holds the only writing end: its exit is the reader's end of file
                running[reader] = _Running(index, name, process)
            for ready in wait(list(running)):
                assert isinstance(ready, Connection)
                worker = running[ready]
                if _receive(ready, worker, progress):
                    continue
                del running[ready]
                ready.close()
                worker.process.join()
                if not worker.value:
                    raise WorkerError(
                        f"simulating {worker.name}: its worker process ended with exit code "
                        f"{worker.process.exitcode} before sending its result (killed, or out of memory?)"
                    )
                values[worker.index] = worker.value[0]
    finally:
        for reader, worker in running.items():
            worker.process.kill()
            worker.process.join()
            reader.close()
    return [values[index] for index in range(len(tasks))]


def _receive(reader: Connection, worker: _Running[T], progress: Progress | None) -> bool:
    """Handle what the worker sent; False once its pipe is closed (the worker is done or gone)."""
    try:
        while reader.poll():
            kind, *payload = reader.recv()
            if kind == _PROGRESS:
                if progress is not None:
                    progress(*payload)
            elif kind == _DONE:
                worker.value.append(payload[0])
            else:
                error, remote = payload
                error.add_note(f"in the worker simulating {worker.name}:\n{remote}")
                raise error
    except EOFError:
        return False
    return True


def _work(task: Task[Any], writer: Connection) -> None:
    """A worker's body: run the task, send its progress and its value (or its error) to the parent."""

    def report(phase: str, fraction: float) -> None:
        writer.send((_PROGRESS, phase, fraction))

    try:
        value = task(report)
    except BaseException as error:  # the parent must hear of any failure, or it would take the exit for one
        writer.send((_FAILED, _sendable(error), traceback.format_exc()))
    else:
        writer.send((_DONE, value))
    finally:
        writer.close()


def _sendable(error: BaseException) -> BaseException:
    """`error` if it survives pickling both ways, else a WorkerError that says what it was."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return WorkerError(f"{type(error).__name__}: {error}")
    return error
