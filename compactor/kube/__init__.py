"""The Kubernetes side of the outside world: what reads the cluster and writes to it.

`client` is the API client (lists, watches, patches, evictions, the Lease,
Events); `snapshot`, `decoding`, `watchlist`, `workloads`, `quantity` and
`integrity` turn what the API server answers into the planner's records;
`kubeconfig` checks credentials before a run. Modules here may import
`compactor.core` (the records they build), `compactor.settings` and the leaves
(`compactor.errors`, `compactor.logs`); never `actuation`, `gcp` or an entry
point.
"""
