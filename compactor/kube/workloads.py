"""Reads Deployments, ReplicaSets and PersistentVolumeClaims into the planner's records.

Only a pool with `surgeSingleReplicas` needs them (`core.surge`): the live
reader lists them only then, and `plan --snapshot` takes them when the saved
List has them (`kubectl get ...,deployments,replicasets,persistentvolumeclaims`).

One typed schema serves both ways in: a list page's bytes decode straight
into it (a ReplicaSet's pod template, most of its bytes, is skipped without
being built), and an item of a saved List is converted into it from plain
JSON (`msgspec.convert`). A value of the wrong type is refused with the
object's name and the field's path; nothing here judges values (a
`maxSurge` of "abc" is kept as written and `core.surge` says it does not
read). Must never: touch the cluster, or change what the planner reads of
any other kind.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import msgspec

from compactor.core.model import RESTARTED_AT, Claim, Deployment, ReplicaSet
from compactor.errors import SnapshotError

# The kinds read here, by kind: the attribute of `snapshot.SnapshotBuilder` their records go to.
KINDS: dict[str, str] = {
    "Deployment": "deployments",
    "ReplicaSet": "replica_sets",
    "PersistentVolumeClaim": "claims",
}


class _Owner(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class _Metadata(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = "default"
    generation: int = 0
    ownerReferences: list[_Owner] | None = None  # noqa: N815 (the field's name in the API)


class _RollingUpdate(msgspec.Struct, gc=False):
    maxSurge: int | str | None = None  # noqa: N815
    maxUnavailable: int | str | None = None  # noqa: N815


class _Strategy(msgspec.Struct, gc=False):
    type: str = "RollingUpdate"
    rollingUpdate: _RollingUpdate | None = None  # noqa: N815


class _TemplateMetadata(msgspec.Struct, gc=False):
    annotations: dict[str, str] | None = None


class _Template(msgspec.Struct, gc=False):
    metadata: _TemplateMetadata | None = None


class _Spec(msgspec.Struct, gc=False):
    # Deployment and ReplicaSet
    replicas: int | None = None
    paused: bool = False
    strategy: _Strategy | None = None
    template: _Template | None = None
    # PersistentVolumeClaim
    accessModes: list[str] | None = None  # noqa: N815


class _Status(msgspec.Struct, gc=False):
    observedGeneration: int = 0  # noqa: N815
    replicas: int = 0
    updatedReplicas: int = 0  # noqa: N815
    availableReplicas: int = 0  # noqa: N815


class _Object(msgspec.Struct, gc=False):
    metadata: _Metadata | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _ListMeta(msgspec.Struct, gc=False):
    continue_: str | None = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct, gc=False):
    metadata: _ListMeta | None = None
    items: list[_Object] | None = None


_PAGE = msgspec.json.Decoder(_Page)
_NO_METADATA = _Metadata()
_NO_SPEC = _Spec()
_NO_STATUS = _Status()


def parse(kind: str, obj: Mapping[str, Any]) -> Deployment | ReplicaSet | Claim:
    """One object of `kind` (a key of KINDS) given as plain JSON; SnapshotError names what is wrong."""
    try:
        typed = msgspec.convert(obj, _Object, strict=True)
    except msgspec.ValidationError as error:
        raise SnapshotError(f"{kind} {_name_of(obj)}: {_where(error)}") from None
    return _record(kind, typed)


def parse_page(kind: str, page: bytes, *, what: str) -> list[Deployment | ReplicaSet | Claim]:
    """The records of one page of a list answer of `kind`, as the API server sent it."""
    try:
        decoded = _PAGE.decode(page)
    except msgspec.ValidationError as error:
        raise SnapshotError(f"cannot {what}: {_where(error)}") from None
    except (msgspec.DecodeError, RecursionError) as error:
        raise SnapshotError(f"cannot {what}: the API server sent invalid JSON ({error})") from None
    return [_record(kind, item) for item in decoded.items or ()]


def _record(kind: str, item: _Object) -> Deployment | ReplicaSet | Claim:
    meta = item.metadata or _NO_METADATA
    if not meta.name:
        raise SnapshotError(f"{kind} in namespace {meta.namespace}: metadata.name: missing")
    namespace = sys.intern(meta.namespace)
    spec = item.spec or _NO_SPEC
    status = item.status or _NO_STATUS
    controller = next((owner for owner in meta.ownerReferences or () if owner.controller is True), None)
    if kind == "Deployment":
        strategy = spec.strategy or _Strategy()
        rolling = strategy.rollingUpdate or _RollingUpdate()
        template = spec.template.metadata if spec.template is not None else None
        annotations = (template.annotations if template is not None else None) or {}
        return Deployment(
            namespace=namespace,
            name=meta.name,
            replicas=1 if spec.replicas is None else spec.replicas,
            strategy=strategy.type,
            max_surge=_int_or_string(rolling.maxSurge),
            max_unavailable=_int_or_string(rolling.maxUnavailable),
            paused=spec.paused,
            generation=meta.generation,
            observed_generation=status.observedGeneration,
            status_replicas=status.replicas,
            updated_replicas=status.updatedReplicas,
            available_replicas=status.availableReplicas,
            restarted_at=annotations.get(RESTARTED_AT),
        )
    if kind == "ReplicaSet":
        return ReplicaSet(
            namespace=namespace,
            name=meta.name,
            deployment=controller.name if controller is not None and controller.kind == "Deployment" else None,
            replicas=1 if spec.replicas is None else spec.replicas,
            status_replicas=status.replicas,
        )
    if kind == "PersistentVolumeClaim":
        return Claim(
            namespace=namespace,
            name=meta.name,
            access_modes=tuple(spec.accessModes or ()),
            owner_pod=controller.name if controller is not None and controller.kind == "Pod" else None,
        )
    raise ValueError(f"not a kind read here: {kind}")


def _int_or_string(value: int | str | None) -> str | None:
    """An IntOrString as written: 1 and "1" mean the same to the API server, and "25%" stays a percentage."""
    return None if value is None else str(value)


def _name_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "(no metadata)"
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or '(no name)'}"


def _where(error: msgspec.ValidationError) -> str:
    """msgspec's message ("Expected `int`, got `str` - at `$.spec.replicas`") with the field path first."""
    text = str(error)
    message, _, path = text.rpartition(" - at `$")
    if not message:
        return text
    return f"{path.rstrip('`').lstrip('.') or '(the object)'}: {message}"
