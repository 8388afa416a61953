"""What a pod asks of a node, with the scheduler's formula (DESIGN rule 1).

    pod = max(sum(app containers) + sum(sidecars), largest init step) + overhead

where init containers run one at a time, each alongside the restartable
("sidecar", `restartPolicy: Always`) init containers started before it.
This is the formula of Kubernetes' `resourcehelper.PodRequests`
(KEP-753 sidecar containers).
"""

from __future__ import annotations

from collections.abc import Iterable

from compactor.core.model import ZERO, Resources


def pod_requests(
    containers: Iterable[Resources],
    init_containers: Iterable[tuple[Resources, bool]],
    overhead: Resources = ZERO,
) -> Resources:
    """`init_containers` are (requests, is_sidecar) in declaration order."""
    app = ZERO
    for requests in containers:
        app = app + requests
    init_containers = list(init_containers)
    if not init_containers:
        return app + overhead
    sidecars = ZERO
    init_peak = ZERO
    for requests, is_sidecar in init_containers:
        if is_sidecar:
            sidecars = sidecars + requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(requests + sidecars)
    return (app + sidecars).max(init_peak) + overhead
