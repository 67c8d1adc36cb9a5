"""Errors a user can act on: each names the file, table or setting at fault and the fix."""


class TributaryError(Exception):
    """A problem with the user's input or environment, reported without a stack trace by the CLI."""


class ConfigError(TributaryError):
    """A setting is missing or has a value that cannot work."""


class SetupError(TributaryError):
    """The machine lacks something Tributary needs (Java, a jar, a Debian package)."""


class PipelineError(TributaryError):
    """A table's incremental run failed; the message names the table."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when empty): what a user is shown."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
