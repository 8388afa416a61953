"""Typed decoding of Kubernetes JSON: only the fields the planner reads, straight from bytes.

A pod in a kubectl List is about 7 KB, of which the planner reads a few
hundred bytes (requests, owner, volumes, scheduling constraints, phase).
msgspec decodes into the Structs below and skips every other field without
building it, which is what makes reading 150,000 pods cheap in time and
memory. One set of Structs serves the snapshot file (one item at a time),
the live list pages (one page at a time) and the events of a streaming list
(a batch of whole lines at a time, `Event`).

The Structs are deliberately strict: a value of an unexpected type or
range fails the typed decode, and the caller then reads that one object
the long way (`compactor.kube.snapshot`), which either accepts it or names the
object and the field that is wrong. Nothing here judges values: that
stays with the reader, so both ways agree by construction.

Sub-objects that thousands of pods repeat word for word (labels, container
requests, tolerations, affinity, spread constraints) are kept as their JSON
text (`msgspec.Raw`): the reader turns each distinct text into a record
once and shares it (the pods of a ReplicaSet carry one labels map, not one
each). Other small maps (annotations, allocatable) are decoded as dicts.
The Structs are not tracked by the cyclic collector (`gc=False`): decoded
JSON holds no reference cycles.
"""

from __future__ import annotations

from typing import Any

import msgspec

# An absent field kept as text: an empty Raw (a present `null` is the text "null").
_ABSENT = msgspec.Raw()


class OwnerReference(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class Metadata(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = "default"
    labels: msgspec.Raw = _ABSENT  # decoded with LABELS
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerReference] | None = None  # noqa: N815 (the field's name in the API)
    creationTimestamp: str = ""  # noqa: N815
    deletionTimestamp: Any = None  # noqa: N815 (only its presence matters)


class ContainerResources(msgspec.Struct, gc=False):
    requests: msgspec.Raw = _ABSENT


class ContainerPort(msgspec.Struct, gc=False):
    hostPort: int = 0  # noqa: N815
    protocol: str = "TCP"
    hostIP: str = ""  # noqa: N815


class Container(msgspec.Struct, gc=False):
    resources: ContainerResources | None = None
    ports: list[ContainerPort] | None = None
    restartPolicy: str = ""  # noqa: N815


class Volume(msgspec.Struct, gc=False):
    name: str = ""
    # Presence is what matters for these, as in the API's one-of union; their content is small.
    hostPath: Any = msgspec.UNSET  # noqa: N815
    emptyDir: Any = msgspec.UNSET  # noqa: N815
    persistentVolumeClaim: Any = msgspec.UNSET  # noqa: N815
    ephemeral: Any = msgspec.UNSET


class Taint(msgspec.Struct, gc=False):
    key: str = ""
    value: str = ""
    effect: str = ""


class Spec(msgspec.Struct, gc=False):
    """The fields of a Pod's, a Node's and a PodDisruptionBudget's spec that the planner reads."""

    # Pod
    nodeName: str = ""  # noqa: N815
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None  # noqa: N815
    overhead: dict[str, Any] | None = None
    priority: int = 0
    volumes: list[Volume] | None = None
    tolerations: msgspec.Raw = _ABSENT
    nodeSelector: dict[str, str] | None = None  # noqa: N815
    affinity: msgspec.Raw = _ABSENT
    topologySpreadConstraints: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET  # noqa: N815
    # Node
    taints: list[Taint] | None = None
    unschedulable: bool = False
    # PodDisruptionBudget
    selector: Any = None
    minAvailable: int | str | None = None  # noqa: N815
    maxUnavailable: int | str | None = None  # noqa: N815


class Condition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str = ""


class Status(msgspec.Struct, gc=False):
    # Pod
    phase: str = "Pending"
    # Kept as text (decoded with CONDITIONS): a pod's conditions matter only while it waits for a
    # node, so the four of each bound pod are never built.
    conditions: msgspec.Raw = _ABSENT
    # Node
    allocatable: dict[str, Any] | None = None
    # PodDisruptionBudget
    disruptionsAllowed: int = 0  # noqa: N815


class Item(msgspec.Struct, gc=False):
    """A Node, a Pod or a PodDisruptionBudget; list items from the API server carry no `kind`."""

    kind: str | None = None
    metadata: Metadata | None = None
    spec: Spec | None = None
    status: Status | None = None


class ItemKind(msgspec.Struct, gc=False):
    """Only the kind: what an item that failed the typed decode is."""

    kind: Any = None


class ListMeta(msgspec.Struct, gc=False):
    # null reads as no token, as Go's encoding/json leaves a string field on null.
    continue_: str | None = msgspec.field(default="", name="continue")
    resourceVersion: str = ""  # noqa: N815


class Page(msgspec.Struct, gc=False):
    """One page of a list answer (`NodeList`, `PodList`, ...)."""

    metadata: ListMeta | None = None
    items: list[Item] | None = None


class RawPage(msgspec.Struct, gc=False):
    """A page whose items are kept as their bytes: used to find and explain a bad item."""

    metadata: ListMeta | None = None
    items: list[msgspec.Raw] | None = None


class PageHead(msgspec.Struct, gc=False):
    """Only the list's kind and metadata (the continue token), read before the items are decoded."""

    kind: str | None = None
    metadata: ListMeta | None = None


class Event(msgspec.Struct, gc=False):
    """One line of a watch stream (`{"type": "ADDED", "object": {...}}`), its object typed like a list item."""

    type: str = ""
    object: Item | None = None


class RawEvent(msgspec.Struct, gc=False):
    """A watch event whose object is kept as its bytes: read one by one when a batch is not all ADDED."""

    type: Any = None
    object: msgspec.Raw = _ABSENT


class ObjectMeta(msgspec.Struct, gc=False):
    """What a watch event's object is called and marked with, whatever its kind (a BOOKMARK's, a DELETED one's)."""

    name: Any = None
    namespace: Any = None
    annotations: Any = None


class ObjectHead(msgspec.Struct, gc=False):
    kind: Any = None
    metadata: ObjectMeta | None = None


class StatusHead(msgspec.Struct, gc=False):
    """The `Status` object of an ERROR watch event."""

    code: Any = None
    reason: Any = None
    message: Any = None


class Document(msgspec.Struct, gc=False):
    """A whole snapshot file that is not laid out as kubectl prints it: items kept as bytes."""

    items: list[msgspec.Raw] | msgspec.UnsetType = msgspec.UNSET


CONDITIONS = msgspec.json.Decoder(list[Condition] | None)
LABELS = msgspec.json.Decoder(dict[str, str] | None)
ITEM = msgspec.json.Decoder(Item)
ITEMS = msgspec.json.Decoder(list[Item])
RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
ITEM_KIND = msgspec.json.Decoder(ItemKind)
PAGE = msgspec.json.Decoder(Page)
RAW_PAGE = msgspec.json.Decoder(RawPage)
PAGE_HEAD = msgspec.json.Decoder(PageHead)
DOCUMENT = msgspec.json.Decoder(Document)
EVENT = msgspec.json.Decoder(Event)  # newline-delimited: EVENT.decode_lines(batch)
RAW_EVENT = msgspec.json.Decoder(RawEvent)
OBJECT_HEAD = msgspec.json.Decoder(ObjectHead)
STATUS_HEAD = msgspec.json.Decoder(StatusHead)
ANY = msgspec.json.Decoder()

DecodeError = msgspec.DecodeError
ValidationError = msgspec.ValidationError
