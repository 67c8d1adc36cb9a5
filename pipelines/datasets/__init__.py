"""Datasets known to the platform. Adding a dataset = a module with `SPECS`, listed here."""

from __future__ import annotations

from pipelines.datasets import clickstream, ecommerce
from pipelines.registry import Registry

DATASETS = (ecommerce, clickstream)


def default_registry() -> Registry:
    """The registry of every table of every dataset, upstream tables first."""
    return Registry(spec for module in DATASETS for spec in module.SPECS)
