"""Named regressions of issue 15: credentials in URLs are never printed or logged, and a value
put into a printed Cypher query cannot end its line or its string."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from knowledge.browser.queries import ready_queries
from tuner.cli import main
from tuner.redact import RedactingFilter, redact_url


def test_redact_url() -> None:
    assert redact_url("http://user:s3cret@prom:9090/x") == "http://***@prom:9090/x"
    assert redact_url("at bolt+s://neo4j:pw@db:7687 and https://h/") == (
        "at bolt+s://***@db:7687 and https://h/"
    )
    assert redact_url("http://prom:9090/?q=a@b") == "http://prom:9090/?q=a@b"


def test_logged_urls_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("tuner.test")
    caplog.handler.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO):
        log.info("querying %s", "http://u:p4ss@prom/")
    assert "p4ss" not in caplog.text and "http://***@prom/" in caplog.text


def test_monitor_never_prints_a_password(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Nothing listens on port 9 (discard): the error names the URL, without its password."""
    settings = tmp_path / "settings.json"
    url = "http://admin:hunter2@127.0.0.1:9"
    settings.write_text(
        json.dumps({"prometheus": {"url": url, "timeout_s": 2}, "load": {"query": "vector(1)"}})
    )
    main(["monitor", "--settings", str(settings), "--format", "json"])
    out, err = capsys.readouterr()
    assert "hunter2" not in out + err and "admin" not in out + err
    assert "127.0.0.1:9" in out + err


@pytest.mark.parametrize(
    "workload",
    [
        "shop/Deployment/web\nMATCH (n) DETACH DELETE n",
        "shop/Deployment/web' RETURN 1 //",
        "shop/Deployment/web\\' MATCH (n) DETACH DELETE n //",
        "a/b/c\u2028MATCH (n) DETACH DELETE n",
        "a/b/c\r\x0b\x1c\x85",
    ],
)
def test_browse_queries_stay_one_line_with_the_value_quoted(workload: str) -> None:
    query = ready_queries(100.0, 0.1, workload)[-1]
    for text in (query.title, query.cypher):
        assert len(text.splitlines()) == 1
    literal = query.cypher.split("w.workload = ", 1)[1].split(" WITH DISTINCT ", 1)[0]
    assert literal.startswith("'") and literal.endswith("'")
    inner = literal[1:-1]
    # every quote inside is escaped: the literal cannot end before its last character
    assert all(inner[i - 1] == "\\" for i, c in enumerate(inner) if c == "'")
