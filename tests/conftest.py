"""Shared pytest configuration: the real-server harnesses are plugins started on demand."""

pytest_plugins = [
    "tests.support.prometheus_fixture",
    "tests.support.neo4j_fixture",
    "tests.support.cluster_fixture",
]
