"""The daemon's HTTP server (``/metrics``, ``/healthz``), bounded against slow and many clients.

- Every read and write on a connection times out after :data:`READ_TIMEOUT_S` (a client that
  sends its request a byte at a time, or never, is dropped), and a connection serves one
  request.
- At most :func:`connection_cap` connections are open (one thread each): a new connection
  closes the oldest, so idle connections can neither exhaust the file descriptors nor keep
  the kubelet's probe out.
- When ``accept`` fails for want of file descriptors (``EMFILE``), the oldest connection is
  closed and the accept loop backs off (5 ms doubling to 1 s, as Go's ``net/http`` does)
  instead of spinning on a listening socket that stays readable.
- The address is resolved like any client would (``::1``, a host name); what cannot be
  resolved or bound is an :class:`~tuner.errors.InputError` naming the setting and the value.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tuner.errors import InputError

READ_TIMEOUT_S = 5.0
"""Seconds a connection may stay silent (or not take what is sent) before it is closed."""
MAX_CONNECTIONS = 64
"""Most connections open at once (Prometheus and the kubelet need a handful)."""
_FIRST_BACKOFF_S, _LAST_BACKOFF_S = 0.005, 1.0


def connection_cap() -> int:
    """:data:`MAX_CONNECTIONS`, or an eighth of the process's file descriptor limit if that is
    lower (the tuner's own clients need the rest), at least 4."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(4, min(MAX_CONNECTIONS, soft // 8))


class BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server with a connection cap and an accept back-off; its handler sets
    ``timeout = READ_TIMEOUT_S``."""

    daemon_threads = True
    request_queue_size = 128
    """The listen backlog (socketserver's 5 makes a burst of clients wait for SYN retries)."""

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        family, address = _address(host, port)
        self.address_family = family
        self.cap = connection_cap()
        self._open: dict[socket.socket, None] = {}  # oldest first
        self._lock = threading.Lock()
        self._backoff_s = 0.0
        self._closing = threading.Event()
        try:
            super().__init__(address, handler)
        except OSError as err:
            field = "port" if err.errno in (errno.EADDRINUSE, errno.EACCES) else "host"
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise InputError(
                f"daemon.metrics_{field}: cannot listen on {where} ({err.strerror or err})"
            ) from None

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._open)

    def get_request(self) -> tuple[Any, Any]:
        try:
            request = super().get_request()
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE):
                self._evict_oldest()
                self._backoff_s = min(_LAST_BACKOFF_S, max(_FIRST_BACKOFF_S, 2 * self._backoff_s))
                self._closing.wait(self._backoff_s)
            raise
        self._backoff_s = 0.0
        return request

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            while len(self._open) >= self.cap:
                self._close(next(iter(self._open)))
            self._open[request] = None
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()

    def _evict_oldest(self) -> None:
        with self._lock:
            if self._open:
                self._close(next(iter(self._open)))

    def _close(self, request: socket.socket) -> None:
        """End a connection (its thread sees the end and closes it); the lock is held."""
        del self._open[request]
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_RDWR)


def _address(host: str, port: int) -> tuple[socket.AddressFamily, tuple[Any, ...]]:
    """The family and socket address to listen on for ``host`` (an address or a name)."""
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
        )
    except (OSError, UnicodeError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise InputError(f"daemon.metrics_host: {host!r} cannot be resolved ({reason})") from None
    family, _type, _proto, _name, address = infos[0]
    return family, address
