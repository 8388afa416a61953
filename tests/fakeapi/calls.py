"""The fake API server's request log in the terms Kubernetes RBAC decides on.

`api_calls(server.requests)` turns each recorded request into an `ApiCall`: verb, API
group, resource, subresource, namespace and name, the attributes an authorizer sees
(Kubernetes docs, "Authorization: Determine the Request Verb" and "Review your request
attributes"). Comparing them with `compactor/permissions.py` shows what a run really
needs. Paths outside the REST resources (`/version`, discovery) are non-resource
calls, kept with their path. Nothing here changes what the server does or records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tests.fakeapi.server import Request, _parse_resource_path

# kube-apiserver's verb for each HTTP method on a named object; a collection's GET is
# `list` (or `watch`), its DELETE `deletecollection`.
_VERB_ON_OBJECT = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class ApiCall:
    verb: str
    group: str
    resource: str  # the plural; "" for a non-resource call
    subresource: str | None
    namespace: str | None
    name: str | None
    path: str

    @property
    def rbac_resource(self) -> str:
        """The resource as an RBAC rule names it: `pods/eviction` for a subresource."""
        return self.resource if self.subresource is None else f"{self.resource}/{self.subresource}"

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        name = f" {self.name}" if self.name else ""
        group = f"{self.group}/" if self.group else ""
        return f"{self.verb} {group}{self.rbac_resource}{name}{where}" if self.resource else f"{self.verb} {self.path}"


def api_call(request: Request) -> ApiCall:
    target = _parse_resource_path(request.path)
    if target is None:
        return ApiCall(request.method.lower(), "", "", None, None, None, request.path)
    if target.name is not None or target.subresource is not None:
        verb = _VERB_ON_OBJECT.get(request.method, request.method.lower())
    elif request.method == "GET":
        verb = "watch" if request.query.get("watch", "").lower() in ("true", "1") else "list"
    elif request.method == "DELETE":
        verb = "deletecollection"
    else:
        verb = _VERB_ON_OBJECT.get(request.method, request.method.lower())
    resource = target.resource
    return ApiCall(
        verb, resource.group, resource.plural, target.subresource, target.namespace, target.name, request.path
    )


def api_calls(requests: Iterable[Request]) -> list[ApiCall]:
    return [api_call(request) for request in requests]
