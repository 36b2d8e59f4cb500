"""Shared pytest configuration: the real-server harnesses are plugins started on demand."""

import signal

import pytest

# A run started in the background (`nohup`, `cmd &`, some CI runners) inherits SIGINT ignored,
# and an ignored signal stays ignored across exec: the commands the tests interrupt with Ctrl-C
# would never see it. Catching it here gives every child process the default disposition.
signal.signal(signal.SIGINT, signal.default_int_handler)

pytest_plugins = [
    "testkit.prometheus_fixture",
    "testkit.neo4j_fixture",
    "testkit.cluster_fixture",
    "testkit.helm",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The image test builds for minutes: it runs only when ``-m`` names it."""
    if "image" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="builds the image for minutes: run with -m image")
    for item in items:
        if item.get_closest_marker("image"):
            item.add_marker(skip)
