"""A fake Kubernetes API server for node-compactor's integration tests and benchmarks.

    from tests.fakeapi import FakeApiServer, Fault
    from tests.fakeapi import builders

    with FakeApiServer(token="test-token") as api:
        api.add(builders.node("n1"))
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.client_configuration()))

What it copies from kube-apiserver, and where Kubernetes documents it: docs/fake-apiserver.md.
"""

from tests.fakeapi.server import Eviction, FakeApiServer, Fault, Request, Write

__all__ = ["Eviction", "FakeApiServer", "Fault", "Request", "Write"]
