"""The Google Cloud side of the outside world: GKE (a cluster's endpoint, credentials and node pools) and Firestore
(the configuration document).

Modules here may import `compactor.core` (the records they fill), `compactor.settings`
and the leaves; never `kube`, `actuation` or an entry point.
"""
