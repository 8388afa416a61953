"""The exceptions node-compactor raises on purpose.

Each maps to one exit code (command line) and one HTTP status (function);
the mapping lives in `EXIT_CODES` / `HTTP_STATUSES` and nowhere else.
Client and library errors are wrapped with ``raise ... from`` so the
original cause stays attached.
"""

from __future__ import annotations

from typing import Any


class CompactorError(Exception):
    """Base of every error node-compactor raises deliberately."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.problems: list[str] = problems if problems is not None else [message]
        # The report of a run that failed part-way, so the answer can still say what was done.
        self.report: dict[str, Any] | None = None


class BadInputError(CompactorError):
    """Input a person gave us is wrong: arguments, parameters, files."""


class RequestTooLargeError(BadInputError):
    """An HTTP request body larger than anything the function accepts."""


class PathNotFoundError(BadInputError):
    """An HTTP request for a path the function does not serve (it answers on `/` only)."""


class ConfigError(BadInputError):
    """The configuration is invalid; `problems` lists each one (field path: reason)."""


class KubeconfigError(BadInputError):
    """The kubeconfig named (by --kubeconfig or KUBECONFIG) cannot be read or is not a kubeconfig."""


class SnapshotError(BadInputError):
    """A cluster snapshot (file or live objects) cannot be read; names object and field."""


class ClusterAccessError(CompactorError):
    """The cluster (or GKE / Firestore) could not be reached or refused us."""


class TransientError(ClusterAccessError):
    """The API server answered 5xx, or the connection broke or timed out, on every attempt of one request.

    Whether a write so answered was carried out is unknown: the caller reads the object again before
    it counts on either. Escaping a run, it is a failed run like any ClusterAccessError."""


class LeaseHeldError(CompactorError):
    """Another run holds the `node-compactor` Lease; this run did nothing."""


class RunFailedError(CompactorError):
    """The run started but could not finish its work."""


class BudgetExhaustedError(RunFailedError):
    """The run's time budget ran out before it could safely act (reading the cluster took too long)."""


class LeaseLostError(RunFailedError):
    """This run no longer holds its Lease (another run took it over): it must stop writing at once."""


class WorkerError(RunFailedError):
    """A simulation's worker process ended without its result: killed, out of memory, or its error unsendable."""


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def exit_code(error: BaseException) -> int:
    """The command-line exit code for an error."""
    if isinstance(error, BadInputError):
        return EXIT_BAD_INPUT
    return EXIT_FAILED


def http_status(error: BaseException) -> int:
    """The HTTP status the function answers with for an error."""
    if isinstance(error, RequestTooLargeError):
        return 413
    if isinstance(error, PathNotFoundError):
        return 404
    if isinstance(error, BadInputError):
        return 400
    if isinstance(error, LeaseHeldError):
        return 409
    return 500
