"""The discovery documents (`/api`, `/apis`, `/version`, ...) for the resources the fake serves.

Clients only read these to find groups and versions, so they list exactly what
the fake implements and nothing more.
"""

from __future__ import annotations

from tests.fakeapi.resources import BY_URL, JsonObject, Resource

# A GKE control plane of the minor version node-compactor is tested against.
VERSION: JsonObject = {
    "major": "1",
    "minor": "33",
    "emulationMajor": "1",
    "emulationMinor": "33",
    "gitVersion": "v1.33.5-gke.1080000",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-10-01T00:00:00Z",
    "goVersion": "go1.24.6 X:boringcrypto",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERBS: dict[str, list[str]] = {
    "nodes": ["create", "delete", "get", "list", "patch", "update"],
    "pods": ["create", "delete", "get", "list", "patch", "update"],
    "events": ["create", "delete", "get", "list", "patch", "update"],
    "poddisruptionbudgets": ["create", "delete", "get", "list", "patch", "update"],
    "leases": ["create", "delete", "get", "list", "patch", "update"],
    "horizontalpodautoscalers": ["create", "delete", "get", "list", "patch", "update"],
    "replicasets": ["create", "delete", "get", "list", "patch", "update"],
    "deployments": ["create", "delete", "get", "list", "patch", "update"],
    "persistentvolumeclaims": ["create", "delete", "get", "list", "patch", "update"],
    "computeclasses": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
}
_SHORT_NAMES = {
    "nodes": ["no"],
    "pods": ["po"],
    "events": ["ev"],
    "poddisruptionbudgets": ["pdb"],
    "horizontalpodautoscalers": ["hpa"],
    "replicasets": ["rs"],
    "deployments": ["deploy"],
    "persistentvolumeclaims": ["pvc"],
    "computeclasses": ["cc"],
}


def _resource_entry(resource: Resource) -> JsonObject:
    entry: JsonObject = {
        "name": resource.plural,
        "singularName": resource.kind.lower(),
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": _VERBS[resource.plural],
    }
    if resource.plural in _SHORT_NAMES:
        entry["shortNames"] = _SHORT_NAMES[resource.plural]
    return entry


def resource_list(group: str, version: str) -> JsonObject | None:
    resources = [r for (g, v, _), r in sorted(BY_URL.items()) if g == group and v == version]
    if not resources:
        return None
    entries = [_resource_entry(r) for r in resources]
    if group == "" and version == "v1":
        entries.append(
            {
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": True,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": version if not group else f"{group}/{version}",
        "resources": entries,
    }


def api_versions(server_address: str) -> JsonObject:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str) -> JsonObject:
    versions = sorted({v for (g, v, _) in BY_URL if g == name})
    preferred = {"groupVersion": f"{name}/{versions[-1]}", "version": versions[-1]}
    return {
        "name": name,
        "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
        "preferredVersion": preferred,
    }


def group(name: str) -> JsonObject | None:
    if not any(g == name for (g, _, _) in BY_URL) or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def group_list() -> JsonObject:
    names = sorted({g for (g, _, _) in BY_URL if g})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(n) for n in names]}
