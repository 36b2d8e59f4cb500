"""Neo4j driver and server failures become one-line KnowledgeErrors naming the server."""

from __future__ import annotations

import pytest
from neo4j.exceptions import AuthError, ClientError, ServiceUnavailable

from knowledge.base import KnowledgeError
from knowledge.neo4j_errors import MAX_DETAIL, one_line, translated

SERVER = "Neo4j at bolt://db:7687 (database neo4j)"


def test_multi_line_driver_messages_become_one_line() -> None:
    error = ServiceUnavailable("Couldn't connect to db:7687:\n  Connection refused\n")
    assert one_line(error) == "Couldn't connect to db:7687: Connection refused"
    assert len(one_line(ServiceUnavailable("x" * 5000))) == MAX_DETAIL
    assert one_line(ServiceUnavailable()) == "ServiceUnavailable"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            ServiceUnavailable("Couldn't connect\nrefused"),
            "server unreachable: Couldn't connect refused",
        ),
        (
            AuthError("The client is unauthorized due to authentication failure."),
            "authentication failed (check the user and the password variable): "
            "The client is unauthorized due to authentication failure.",
        ),
        (OSError("disk full"), "OSError: disk full"),
    ],
)
def test_failures_are_translated(error: Exception, expected: str) -> None:
    with pytest.raises(KnowledgeError) as raised, translated(SERVER, "record"):
        raise error
    assert str(raised.value) == f"{SERVER}: record failed: {expected}"
    assert raised.value.__cause__ is error


def test_server_errors_carry_their_code() -> None:
    # as the driver builds them from a server's FAILURE message
    error = ClientError._hydrate_neo4j(
        code="Neo.ClientError.Statement.ArithmeticError", message="/ by zero\nat line 3"
    )
    with pytest.raises(KnowledgeError) as raised, translated(SERVER, "record"):
        raise error
    assert str(raised.value) == (
        f"{SERVER}: record failed: Neo.ClientError.Statement.ArithmeticError: / by zero at line 3"
    )


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), translated(SERVER, "record"):
        raise KeyError("a bug, not an outage")
