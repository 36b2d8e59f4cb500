"""The error every bad input is reported as: one line, exit status 2."""


class InputError(Exception):
    """Bad input (settings, dump, arguments): reported as a one-line message, never a traceback."""


class ServiceError(Exception):
    """An external service (Kubernetes, Prometheus, Neo4j) failed: one line, exit status 1."""
