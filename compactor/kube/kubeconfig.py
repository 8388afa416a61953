"""What the official client's kubeconfig loader does not check, and the one log line of it that leaks.

`kubernetes.config.load_kube_config` reads the file; this module looks first at the
entries the current context names, so that a bad one is a KubeconfigError naming the
field instead of a traceback at the first request (key data that is not UTF-8 text
makes urllib3 raise UnicodeDecodeError while it connects), and so that a server URL
carrying user info or a query string is refused before anything is sent to it. It also
watches the loader for an exec credential plugin that failed: the loader logs the
plugin's stderr at ERROR through the root logger and carries on without credentials.

This module must never put a credential in an error or a log line: not a server URL's
user info or query string, not certificate or key data, not what a plugin printed.
Anything it cannot read is left for the loader to report.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from compactor.errors import KubeconfigError

# The fields whose value is base64 of PEM text, by the entry that holds them.
DATA_FIELDS = {"clusters": ("certificate-authority-data",), "users": ("client-certificate-data", "client-key-data")}
# A key file is read as text by urllib3 (`_is_key_file_encrypted`) before the TLS handshake.
KEY_FILE_FIELD = "client-key"
MAX_KEY_FILE_BYTES = 1024 * 1024
# Where the loader's own log lines come from: every one of them is about an exec plugin.
_LOADER_MODULE = os.path.join("kubernetes", "config", "kube_config.py")
EXEC_PLUGIN_FAILED = (
    "the kubeconfig's exec credential plugin failed; what it printed is not shown because it can carry "
    "secrets (run the plugin by hand to see it)"
)


class _FieldError(ValueError):  # internal: `check` turns it into a KubeconfigError
    """A field of the kubeconfig the client would trip on; the message names the field, never its value."""


def check(path: str, shown: str) -> None:
    """KubeconfigError naming the field, for the server URL or certificate and key data of the
    current context's entries (`shown` is how the error names the file).

    `path` may be a KUBECONFIG list: entries are merged as the client merges them (the
    first entry of a name wins; the last `current-context` wins).
    """
    try:
        _check(path)
    except _FieldError as error:
        raise KubeconfigError(f"kubeconfig {shown}: {error}") from None


def _check(path: str) -> None:
    merged = _merged(path)
    if merged is None:
        return
    documents, current = merged
    context = _named(documents, "contexts", current)
    if context is None or not isinstance(context[1].get("context"), Mapping):
        return
    for kind in ("clusters", "users"):
        name = context[1]["context"].get(kind[:-1])
        found = _named(documents, kind, name)
        if found is None:
            continue
        source, entry = found
        body = entry.get(kind[:-1])
        if not isinstance(body, Mapping):
            continue
        where = f"{kind}[{name}]"
        if kind == "clusters":
            _check_server(where, body.get("server"))
        for field in DATA_FIELDS[kind]:
            if field in body:
                _check_data(f"{where}.{field}", body[field])
        if kind == "users" and isinstance(body.get(KEY_FILE_FIELD), str) and KEY_FILE_FIELD + "-data" not in body:
            _check_key_file(f"{where}.{KEY_FILE_FIELD}", body[KEY_FILE_FIELD], os.path.dirname(source))


def redacted_url(url: str) -> str:
    """The URL with its user info, query and fragment replaced by `***`."""
    split = urllib.parse.urlsplit(url)
    host = split.hostname or ""
    if split.port is not None:
        host = f"{host}:{split.port}"
    netloc = f"***@{host}" if split.username is not None or split.password is not None else host
    return urllib.parse.urlunsplit(
        (split.scheme, netloc, split.path, "***" if split.query else "", "***" if split.fragment else "")
    )


def _check_server(where: str, server: object) -> None:
    if not isinstance(server, str):
        return
    try:
        split = urllib.parse.urlsplit(server)
        userinfo = split.username is not None or split.password is not None
    except ValueError:
        return  # the loader or the first request reports a URL it cannot use
    carried = [
        what
        for what, present in (
            ("user info", userinfo),
            ("a query string", bool(split.query)),
            ("a fragment", bool(split.fragment)),
        )
        if present
    ]
    if carried:
        raise _FieldError(
            f"{where}.server carries {' and '.join(carried)} ({redacted_url(server)}); a server URL is "
            "scheme://host[:port][/path] (the API paths are appended to it, and user info in it is never "
            "sent), and credentials belong in the user entry"
        )


def _check_data(where: str, value: object) -> None:
    if not isinstance(value, str):
        raise _FieldError(f"{where} is not a string of base64")
    try:
        decoded = base64.standard_b64decode(value)  # as the client decodes it: characters outside base64 skipped
    except (binascii.Error, ValueError):
        raise _FieldError(f"{where} is not valid base64") from None
    try:
        decoded.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _FieldError(
            f"{where} does not decode to PEM text (byte {error.start} is not UTF-8); "
            "it must be base64 of the PEM file, as `base64 -w0 FILE` prints it"
        ) from None


def _check_key_file(where: str, file: str, base: str) -> None:
    location = os.path.join(base, os.path.expanduser(file))
    try:
        with open(location, "rb") as key:
            content = key.read(MAX_KEY_FILE_BYTES + 1)
    except OSError:
        return  # the loader names a file it cannot read
    if len(content) > MAX_KEY_FILE_BYTES:
        raise _FieldError(f"{where}: {file} is larger than {MAX_KEY_FILE_BYTES} bytes; not a PEM key")
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _FieldError(f"{where}: {file} is not PEM text (byte {error.start} is not UTF-8)") from None


def _merged(path: str) -> tuple[list[tuple[str, Mapping[str, Any]]], object] | None:
    """(each file with its document, the current context's name), or None when a file cannot be read."""
    documents: list[tuple[str, Mapping[str, Any]]] = []
    current: object = None
    for file in path.split(os.pathsep):
        file = os.path.expanduser(file)
        if not file or not os.path.exists(file):
            continue
        try:
            with open(file, "rb") as stream:
                document = yaml.safe_load(stream)
        except (OSError, yaml.YAMLError):
            return None
        if not isinstance(document, Mapping):
            return None
        documents.append((file, document))
        current = document.get("current-context", current)
    return documents, current


def _named(
    documents: list[tuple[str, Mapping[str, Any]]], kind: str, name: object
) -> tuple[str, Mapping[str, Any]] | None:
    for source, document in documents:
        entries = document.get(kind)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, Mapping) and entry.get("name") == name:
                return source, entry
    return None


class _ExecPluginLog(logging.Filter):
    """The loader's log lines (each about a failed exec plugin), kept from leaking what the plugin printed.

    Attached to the root logger, through which the loader logs (`logging.error`), for the
    life of the process: the client runs the plugin again when its credential expires,
    in the middle of a run, and that failure must not leak either. Such a line is
    rewritten to a fixed sentence; while `exec_plugin_watch` is open on the thread, it is
    counted and dropped instead, since the caller reports the failure itself.
    """

    def __init__(self) -> None:
        super().__init__()
        self.watched = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.endswith(_LOADER_MODULE):
            return True
        failures = getattr(self.watched, "failures", None)
        if failures is not None:
            failures.append(True)
            return False
        record.msg = EXEC_PLUGIN_FAILED
        record.args = ()
        return True


def _exec_plugin_log() -> _ExecPluginLog:
    root = logging.getLogger()
    for existing in root.filters:
        if isinstance(existing, _ExecPluginLog):
            return existing
    installed = _ExecPluginLog()
    root.addFilter(installed)
    return installed


@contextlib.contextmanager
def exec_plugin_watch() -> Iterator[list[bool]]:
    """Around the loader: yields a list that is not empty afterwards when an exec plugin failed meanwhile."""
    watcher = _exec_plugin_log()
    failures: list[bool] = []
    watcher.watched.failures = failures
    try:
        yield failures
    finally:
        watcher.watched.failures = None
