"""node-compactor: packs pods onto fewer GKE nodes so the Cluster Autoscaler can remove the rest."""

__version__ = "0.1.0"
