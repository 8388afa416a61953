"""What a write to the API server can answer besides success, apart from the client that makes it, so that
the executor's other ports (the simulator's) share them without loading the Kubernetes client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EvictionStatus = Literal["evicted", "gone", "blocked", "retry", "failed"]


class ConflictError(Exception):
    """The object changed since it was read (HTTP 409); the caller decides what that means."""


class NotFoundError(Exception):
    """The object no longer exists (HTTP 404)."""


@dataclass(frozen=True, slots=True)
class EvictionResult:
    status: EvictionStatus
    detail: str = ""
    # A 5xx or a broken connection: the eviction may have been carried out although the answer says not.
    unknown: bool = False
