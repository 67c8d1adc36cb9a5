"""Figures observed while a DataFrame is written (`DataFrame.observe`), waited for within a bound."""

from __future__ import annotations

import time
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import Observation

# Spark hands observed figures over on its listener bus once the action has finished, within milliseconds as a
# rule; past this bound the caller computes them another way rather than wait on a busy bus.
OBSERVED_WAIT_SECONDS = 10.0


def observed(observation: Observation, timeout: float = OBSERVED_WAIT_SECONDS) -> dict[str, Any] | None:
    """The figures of `observation` after its DataFrame's first action; None when they have not arrived within
    `timeout` seconds."""
    handle = observation._jo
    if handle is None:
        return None
    try:
        future = handle.future()
        deadline = time.monotonic() + timeout
        while not future.isCompleted():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.002)
        return observation.get
    except Py4JError:
        return None
