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

MAX_DETAIL = 300
"""Characters of a driver or server message kept in an error line."""


def one_line(error: BaseException) -> str:
    """An error's message on one line (driver messages span several), at most
    :data:`MAX_DETAIL` characters.

    A server error's text is its ``message``; any other error's is its ``str``. (The
    driver's GQL ``message`` of a local error is a placeholder, "50N42: Unexpected error",
    and reading it warns that GQL status support is a preview.)
    """
    text = (error.message if isinstance(error, Neo4jError) else None) or str(error)
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip())
    joined = joined or type(error).__name__
    return joined if len(joined) <= MAX_DETAIL else joined[: MAX_DETAIL - 1] + "…"


def describe(error: Exception) -> str:
    """What went wrong, in words an operator can act on."""
    if isinstance(error, AuthError):
        return (
            f"authentication failed (check the user and the password variable): {one_line(error)}"
        )
    if isinstance(error, ServiceUnavailable | SessionExpired):
        return f"server unreachable: {one_line(error)}"
    if isinstance(error, Neo4jError):
        return f"{error.code or type(error).__name__}: {one_line(error)}"
    return f"{type(error).__name__}: {one_line(error)}"


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
