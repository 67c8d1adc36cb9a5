"""Spark start-up failures as one line naming the setting at fault."""

from __future__ import annotations

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkRuntimeError
from pyspark.errors.exceptions.captured import CapturedException

from infra.errors import ConfigError
from infra.settings import Settings, spark_conf_label


def java_cause(exc: Exception) -> str:
    """The message of the innermost Java exception behind `exc`, on one line."""
    message = str(exc)
    try:
        if isinstance(exc, CapturedException):
            while exc.cause is not None:
                exc = exc.cause
            message = exc.desc
        elif isinstance(exc, Py4JJavaError):
            throwable = exc.java_exception
            while throwable.getCause() is not None:
                throwable = throwable.getCause()
            message = throwable.getMessage() or throwable.toString()
    except Py4JError:  # the JVM is gone: keep Python's text
        pass
    return " ".join(message.split()).rstrip(".")


def start_failure(settings: Settings, exc: Exception) -> ConfigError:
    """One line naming the setting Spark rejected at start-up (matched by key, then by value) and the fix."""
    if isinstance(exc, PySparkRuntimeError) and exc.getErrorClass() == "JAVA_GATEWAY_EXITED":
        cause = "its JVM exited at once (Spark's own message is above)"
    else:
        cause = java_cause(exc)
    sources = settings.spark_sources()
    culprit = next((s for s in sources if s[0] in cause), None)
    culprit = culprit or next((s for s in sources if len(s[2]) > 1 and s[2] in cause), None)
    if culprit is not None:
        _, label, value = culprit
        return ConfigError(f"{label}={value!r} was rejected by Spark at start-up: {cause}; fix or remove it")
    suspects = [s for s in sources if s[1] == spark_conf_label(s[0])] or [
        s for s in sources if s[0] in ("spark.master", "spark.driver.memory")
    ]
    hint = ", ".join(f"{label}={value!r}" for _, label, value in suspects)
    return ConfigError(f"Spark did not start: {cause}; check {hint}")
