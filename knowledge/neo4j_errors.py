"""Neo4j driver failures turned into one-line :class:`KnowledgeError` messages naming the server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from neo4j.exceptions import (
    AuthError,
    DriverError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
)

from knowledge.base import KnowledgeError


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message (driver messages can span many)."""
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def describe(error: Exception) -> str:
    """What went wrong, in words an operator can act on."""
    if isinstance(error, AuthError):
        return (
            f"authentication failed (check the user and the password variable): {first_line(error)}"
        )
    if isinstance(error, ServiceUnavailable | SessionExpired):
        return f"server unreachable: {first_line(error)}"
    if isinstance(error, Neo4jError):
        return f"{error.code or type(error).__name__}: {first_line(error)}"
    return f"{type(error).__name__}: {first_line(error)}"


@contextmanager
def translated(server: str, action: str) -> Iterator[None]:
    """Run a block; a driver or server failure leaves it as a KnowledgeError.

    ``server`` names the server (``Neo4j at bolt://host:7687, database neo4j``), ``action``
    what was attempted (``record``, ``find_by_load``, ...). Timeouts arrive as ClientError
    (transaction timed out), TransientError or ServiceUnavailable and are covered too.
    """
    try:
        yield
    except (Neo4jError, DriverError, OSError, ValueError) as err:
        raise KnowledgeError(f"{server}: {action} failed: {describe(err)}") from err
