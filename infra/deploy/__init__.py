"""Deployment: the Dagster instance files of each profile and the one-host cluster (`tributary cluster up`)."""

from __future__ import annotations

from pathlib import Path

from infra.profile import Deployment

_INFRA = Path(__file__).resolve().parent.parent
LOCAL_INSTANCE = _INFRA / "dagster.yaml"
CLUSTER_INSTANCE = _INFRA / "deploy" / "dagster.yaml"
# How each file begins, also in copies made by earlier versions.
_MARKERS = ("# Local Dagster instance for the embedded deployment", "# Dagster instance of the cluster profile")


def instance_yaml(deployment: Deployment) -> Path:
    """The `dagster.yaml` of the profile: SQLite files under $DAGSTER_HOME, or PostgreSQL for the cluster."""
    if deployment.cluster:
        deployment.require_dagster_storage()
        return CLUSTER_INSTANCE
    return LOCAL_INSTANCE


def is_ours(text: str) -> bool:
    """Whether a `dagster.yaml` is one of these files (refreshed when they change), not one a person wrote."""
    return text.startswith(_MARKERS)
