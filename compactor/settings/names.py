"""Kubernetes names a person gives node-compactor (namespaces from the environment, the configuration or
the command line), checked before any of them reaches the API server.

A namespace the API server would refuse must stop a run before its first request: a run that reads the
cluster and then fails on its Lease, or a dry run that reports with a name it could never use, hides the
mistake. The rule is the API server's own for a namespace (a DNS-1123 label, k8s.io/apimachinery
pkg/util/validation IsDNS1123Label), stated in the message.

Pure: strings in, sentences out; nothing here reads the environment or raises a node-compactor error.
"""

from __future__ import annotations

import re

MAX_LABEL_LENGTH = 63
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_RULE = (
    f"a DNS-1123 label: at most {MAX_LABEL_LENGTH} characters of lowercase letters, digits and '-', starting and "
    "ending with a letter or digit (e.g. kube-system)"
)


def namespace_problem(name: str) -> str | None:
    """Why `name` cannot be a namespace, or None when it can."""
    if len(name) <= MAX_LABEL_LENGTH and _DNS_LABEL.fullmatch(name):
        return None
    return f"{name!r} is not a valid namespace: a namespace is {DNS_LABEL_RULE}"
