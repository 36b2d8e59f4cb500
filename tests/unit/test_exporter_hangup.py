"""The test exporter stays quiet when a scraper hangs up mid-answer (a scrape timeout)."""

from __future__ import annotations

import socket
import struct

import pytest

from testkit.exporter import TestExporter


def test_a_scraper_hanging_up_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    exporter = TestExporter().start()
    try:
        exporter.set_cluster(nodes=[f"node-{i}" for i in range(200)])
        for _ in range(20):
            client = socket.create_connection(("127.0.0.1", exporter.port))
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
            client.close()  # a reset, not a clean close: the answer's write fails
        before = exporter.scrape_count
        with socket.create_connection(("127.0.0.1", exporter.port)) as client:
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            assert client.recv(12) == b"HTTP/1.0 200"
    finally:
        exporter.stop()  # joins the serving thread; handler threads are daemons
    assert exporter.scrape_count > before
    assert capfd.readouterr().err == ""
