"""Reads the configuration JSON from a Firestore document (`COMPACTOR_FIRESTORE_DOCUMENT`).

Two layouts are accepted: a single string field `config` holding the JSON
text (what the Terraform module writes), or the document's fields being the
configuration object itself (what a person typing in the console does). The
text returned is validated by `compactor.settings.config`, not here.

This module never writes to Firestore, and never waits long: every call has a
short deadline so a run cannot hang on an unreachable database.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

import google.auth
import google.auth.exceptions
import orjson
from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry

from compactor.errors import ClusterAccessError, ConfigError
from compactor.settings.config import ENV_FIRESTORE_DATABASE, ENV_FIRESTORE_DOCUMENT

DEFAULT_DATABASE = "(default)"
CONFIG_FIELD = "config"
TIMEOUT_SECONDS = 10.0


def read_config_document(document: str, database: str | None, *, client: Any = None) -> str:
    """The configuration JSON text of `collection/document` (a `compactor.settings.config.FirestoreReader`).

    `client` replaces the `google.cloud.firestore.Client` built from the
    environment (its project and database then come from the client).
    """
    path = _document_path(document)
    database_name = database or DEFAULT_DATABASE
    where = f"firestore document {path} (database {database_name})"
    try:
        if client is None:
            client = _client(database_name)
        # Transient errors (UNAVAILABLE, ...) are retried, but only within the
        # deadline of a single call.
        retry = api_retry.Retry(
            predicate=api_retry.if_transient_error, initial=0.25, maximum=2.0, timeout=TIMEOUT_SECONDS
        )
        snapshot = client.document(path).get(retry=retry, timeout=TIMEOUT_SECONDS)
    except api_exceptions.NotFound as error:
        # A missing document is not an error from Firestore; a missing database is.
        raise ConfigError(
            f"cannot read {where}: the database does not exist ({ENV_FIRESTORE_DATABASE}): {error}"
        ) from error
    except (api_exceptions.GoogleAPICallError, api_exceptions.RetryError) as error:
        raise ClusterAccessError(f"cannot read {where}: {error}") from error
    except google.auth.exceptions.GoogleAuthError as error:
        raise ClusterAccessError(f"cannot authenticate to Firestore to read {where}: {error}") from error
    if not snapshot.exists:
        raise ConfigError(f"firestore document {path} not found in database {database_name} ({ENV_FIRESTORE_DOCUMENT})")
    return _config_text(snapshot.to_dict() or {}, where)


def _document_path(document: str) -> str:
    segments = document.strip().strip("/").split("/")
    if len(segments) % 2 != 0 or any(segment.strip() == "" for segment in segments):
        raise ConfigError(
            f"{ENV_FIRESTORE_DOCUMENT}={document!r} does not name a document: "
            "use collection/document (or collection/document/subcollection/document)"
        )
    return "/".join(segments)


def _client(database: str) -> Any:
    # Imported here: Firestore pulls in gRPC, which runs configured through
    # COMPACTOR_CONFIG or --config never need.
    from google.cloud import firestore

    project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT")
    credentials = None
    # Against the emulator the client needs neither credentials nor a real project.
    if project is None and not os.environ.get("FIRESTORE_EMULATOR_HOST"):
        try:
            credentials, project = google.auth.default()
        except google.auth.exceptions.DefaultCredentialsError as error:
            raise ClusterAccessError(f"cannot find Google credentials to read Firestore: {error}") from error
        if not project:
            raise ConfigError("cannot tell which project's Firestore to read: set GOOGLE_CLOUD_PROJECT")
    return firestore.Client(project=project, credentials=credentials, database=database)


def _config_text(fields: Mapping[str, Any], where: str) -> str:
    if CONFIG_FIELD in fields:
        others = sorted(key for key in fields if key != CONFIG_FIELD)
        if others:
            raise ConfigError(
                f"{where} has a field {CONFIG_FIELD!r} and other fields ({', '.join(others)}): either put the "
                f"whole JSON text in {CONFIG_FIELD!r} or store the configuration's keys as the document's fields"
            )
        text = fields[CONFIG_FIELD]
        if not isinstance(text, str):
            raise ConfigError(
                f"{where}: field {CONFIG_FIELD!r} must be a string holding the configuration JSON, not {_kind(text)}"
            )
        return text
    if not fields:
        raise ConfigError(
            f"{where} has no fields: expected a string field {CONFIG_FIELD!r} holding the configuration JSON, "
            "or the configuration's keys (nodePools, ...) as fields"
        )
    return orjson.dumps(_plain(fields, where, path="")).decode()


_MAX_INT64 = 2**63 - 1


def _plain(value: Any, where: str, *, path: str) -> Any:
    """A Firestore value as JSON data; values JSON cannot hold are errors naming the field."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_INT64:
        # Firestore tools blur integer and double (a console "number", a
        # JavaScript number): 300.0 stored for neededMarkedTimeSeconds means 300.
        # A double beyond int64 stays a double, for validation to refuse by name.
        return int(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {
            str(key): _plain(item, where, path=f"{path}.{key}" if path else str(key)) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_plain(item, where, path=f"{path}[{index}]") for index, item in enumerate(value)]
    raise ConfigError(
        f"{where}: field {path} holds {_kind(value)}; configuration values are strings, numbers, "
        "booleans, maps and arrays"
    )


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, datetime.datetime):
        return "a timestamp"
    if isinstance(value, bytes):
        return "bytes"
    return f"a {type(value).__name__}"
