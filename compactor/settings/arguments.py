"""Command-line arguments shared by the subcommands that reach a live cluster.

Only argparse: no client is built here.
"""

from __future__ import annotations

import argparse


def cluster_arguments(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """`--kubeconfig FILE | --gke NAME` on `parser`; the group is returned so a command can add its own choice."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use (default: KUBECONFIG, ~/.kube/config)")
    where.add_argument(
        "--gke",
        metavar="projects/P/locations/L/clusters/C",
        help="a GKE cluster, with your gcloud application-default credentials",
    )
    return where
