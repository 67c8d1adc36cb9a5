"""Datasets known to the platform: a folder each, with its tables (`tables.SPECS`) and its demo data generator."""

from __future__ import annotations

from pipelines.datasets.clickstream import tables as clickstream
from pipelines.datasets.ecommerce import tables as ecommerce
from pipelines.spec.registry import Registry

DATASETS = (ecommerce, clickstream)


def default_registry() -> Registry:
    """The registry of every table of every dataset, upstream tables first."""
    return Registry(spec for module in DATASETS for spec in module.SPECS)
