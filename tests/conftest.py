"""Shared pytest configuration: the real-server harnesses are plugins started on demand."""

pytest_plugins = [
    "testkit.prometheus_fixture",
    "testkit.neo4j_fixture",
    "testkit.cluster_fixture",
    "testkit.helm",
]
