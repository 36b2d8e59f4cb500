"""The live cluster through the official ``kubernetes`` client (kubeconfig, context or in-cluster).

Objects are read raw (``_preload_content=False``) and decoded with ``orjson`` — the client's
generated models cost most of the time and memory of a large read — then each is parsed alone
as it arrives (:func:`parse_live`, the parsers of an offline dump) and the page dropped, so a
list never holds more than one page of API objects. :func:`~tuner.monitor.dump.assemble` joins
the parsed objects into a cluster exactly as a dump's are joined. :func:`list_kind` and
:class:`WatchStream` are shared with the daemon's watch-backed cache (:mod:`tuner.monitor.cache`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import orjson
import urllib3
import yaml  # type: ignore[import-untyped]
from kubernetes import client, config
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.watch.watch import iter_resp_lines

from tuner.errors import InputError, ServiceError
from tuner.model.cluster import Cluster
from tuner.monitor.decode import gc_paused
from tuner.monitor.dump import Parsed, assemble, parse_object, refusal
from tuner.monitor.prune import Obj
from tuner.settings import Kubernetes

PAGE_LIMIT = 500
"""Objects per list page: bounds the memory of one decoded response."""

CONNECT_TIMEOUT_S = 10.0

MAX_PAGES = 20_000
"""Most pages one list may take (10 million objects): an API server that keeps sending new
``continue`` tokens cannot keep a read going for ever."""


class _ApiClient(ApiClient):
    """The API client with a deadline on every request that sets none (every call but the
    watches, which set their own): an API server that accepts a connection and never answers
    fails the request after ``timeout_s`` instead of hanging the tuner."""

    def __init__(self, configuration: client.Configuration, timeout_s: float) -> None:
        super().__init__(configuration)
        self.timeout = (CONNECT_TIMEOUT_S, timeout_s)

    def call_api(
        self,
        method: Any,
        url: Any,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        timeout = _request_timeout or self.timeout
        return super().call_api(method, url, header_params, body, post_params, timeout)


_HOST: Any = vars(client.Configuration)["host"]
"""The client configuration's own ``host`` property."""


class _Configuration(client.Configuration):
    """The client's configuration, whose API server stays the one :meth:`pin` fixed.

    The client's token refresh hook (a kubeconfig user with a token or an exec plugin, or the
    in-cluster service account) copies the kubeconfig's server back on every request, from
    every thread; a plain assignment of ``host`` would be undone by the next request.
    """

    _pinned: str | None = None

    @property
    def host(self) -> str:
        return self._pinned or str(_HOST.fget(self))

    @host.setter
    def host(self, value: str) -> None:
        if self._pinned is None:
            _HOST.fset(self, value)

    def pin(self, server: str) -> None:
        """Send every request to ``server``, whatever the configuration loaders set later."""
        _HOST.fset(self, server)
        self._pinned = server


def api_client(settings: Kubernetes) -> ApiClient:
    """An API client configured from settings (in-cluster, or a kubeconfig and context); with
    ``api_server`` every request goes there, whatever the kubeconfig's server and auth."""
    configuration = _Configuration()
    try:
        if settings.in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=settings.kubeconfig,
                context=settings.context,
                client_configuration=configuration,
            )
    except (ConfigException, OSError) as err:
        raise InputError(f"kubernetes: cannot load configuration: {err}") from err
    except yaml.YAMLError as err:
        where = settings.kubeconfig or "the kubeconfig"
        raise InputError(f"kubernetes: {where} is not valid YAML: {_first_line(err)}") from None
    except (TypeError, AttributeError, KeyError, ValueError) as err:
        where = settings.kubeconfig or "the kubeconfig"
        raise InputError(f"kubernetes: {where} is malformed ({_first_line(err)})") from None
    if settings.api_server:
        configuration.pin(settings.api_server.rstrip("/"))
    return _ApiClient(configuration, settings.timeout_s)


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


_LISTERS: dict[str, Callable[[ApiClient], Callable[..., Any]]] = {
    "Node": lambda c: client.CoreV1Api(c).list_node,
    "Pod": lambda c: client.CoreV1Api(c).list_pod_for_all_namespaces,
    "Deployment": lambda c: client.AppsV1Api(c).list_deployment_for_all_namespaces,
    "ReplicaSet": lambda c: client.AppsV1Api(c).list_replica_set_for_all_namespaces,
    "Job": lambda c: client.BatchV1Api(c).list_job_for_all_namespaces,
    "PodDisruptionBudget": lambda c: (
        client.PolicyV1Api(c).list_pod_disruption_budget_for_all_namespaces
    ),
    "HorizontalPodAutoscaler": lambda c: (
        client.AutoscalingV2Api(c).list_horizontal_pod_autoscaler_for_all_namespaces
    ),
    "PersistentVolumeClaim": lambda c: (
        client.CoreV1Api(c).list_persistent_volume_claim_for_all_namespaces
    ),
    "PersistentVolume": lambda c: client.CoreV1Api(c).list_persistent_volume,
}

KINDS: tuple[str, ...] = tuple(_LISTERS)
"""Every kind the tuner reads (those :func:`~tuner.monitor.dump.cluster_from_objects` parses)."""


T = TypeVar("T")

SKIP = refusal(strict=False)
"""What happens to an unusable live object: it is skipped with a warning naming it."""


def parse_live(kind: str, obj: Mapping[str, Any]) -> Parsed:
    """A live object of ``kind`` parsed alone (a list's items carry no ``kind``); what is
    unusable in it is skipped, and warned about by each assembly of it, not now."""
    problems: list[str] = []
    parsed = parse_object({**obj, "kind": kind}, problems.append)
    return parsed._replace(problems=tuple(problems)) if problems else parsed


@dataclass(frozen=True)
class Listing(Generic[T]):
    """A complete list of one kind: each object converted, and the resourceVersion to watch
    from."""

    objects: list[T]
    version: str


@contextlib.contextmanager
def _released(response: Any) -> Iterator[Any]:
    """A raw response whose connection goes back to the pool only when it was read to its end;
    one left half-read (an error, a timeout, a watch ended early) is closed instead, or the
    next request on that connection would read the rest as its own."""
    try:
        yield response
    except BaseException:
        response.close()
        raise
    finally:
        response.release_conn()


class _ListMeta(msgspec.Struct, rename={"token": "continue", "version": "resourceVersion"}):
    token: str = ""
    version: str = ""


class _ListHead(msgspec.Struct):
    """A list response's metadata; its items are skipped (scanned in C, no objects built)."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


_HEAD = msgspec.json.Decoder(_ListHead)


def list_kind(
    api: ApiClient,
    kind: str,
    convert: Callable[[str, Obj], T],
    *,
    from_cache: bool = False,
) -> Listing[T]:
    """Every object of ``kind`` as ``convert(kind, object)`` gives it, in pages of
    :data:`PAGE_LIMIT` (a consistent read). The next page is requested as soon as a page has
    come (its ``continue`` token read first), so the API server prepares it while this process
    decodes and converts the last: at most two pages are held, one as API objects.

    With ``from_cache`` the first page asks for ``resourceVersion=0`` (``NotOlderThan``), which
    the API server answers from its watch cache instead of etcd — but kube-apiserver 1.33 then
    ignores the limit and sends every object in one response (measured: 3,000 pods, 10 MB in one
    page), whose decoding is the peak of a large cluster's memory; hence not the default.
    Raises :class:`ApiException`, a connection error, a ``ValueError`` (invalid JSON) or a
    :class:`ServiceError` (a ``continue`` token sent twice, more than :data:`MAX_PAGES` pages).
    """
    lister = _LISTERS[kind](api)

    def fetch(token: str) -> tuple[bytes, _ListMeta]:
        params: dict[str, Any] = {"limit": PAGE_LIMIT}
        if token:
            params["_continue"] = token
        elif from_cache:
            params |= {"resource_version": "0", "resource_version_match": "NotOlderThan"}
        with _released(lister(**params, _preload_content=False)) as response:
            data = response.data
        return data, _HEAD.decode(data).metadata

    objects: list[T] = []
    tokens: set[str] = set()
    page = _ahead(fetch, "", kind)
    while True:
        data, meta = page.result()
        if meta.token:
            if meta.token in tokens or len(tokens) >= MAX_PAGES:
                why = (
                    "sent the same continue token twice"
                    if meta.token in tokens
                    else f"did not end after {MAX_PAGES} pages"
                )
                raise ServiceError(f"kubernetes API: the list of {kind} {why}")
            tokens.add(meta.token)
            page = _ahead(fetch, meta.token, kind)
        with gc_paused():  # its passes over a page's tree cost twice the decoding
            items = orjson.loads(data).get("items") or ()
            objects.extend(convert(kind, item) for item in items)
        if not meta.token:
            return Listing(objects, meta.version)


def _ahead(fetch: Callable[[str], T], token: str, kind: str) -> Future[T]:
    """``fetch(token)`` in a daemon thread: a page requested from a server that does not
    answer never keeps the process from exiting (a pool's worker thread would, until the
    request timed out)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fetch(token))
        except BaseException as err:  # handed to the reader of the page
            future.set_exception(err)

    threading.Thread(target=run, name=f"list-{kind}", daemon=True).start()
    return future


class WatchStream:
    """One open watch request of a kind: its decoded events, and a way to end it early."""

    def __init__(self, api: ApiClient, kind: str, version: str, timeout_s: int) -> None:
        """Open the watch after ``version`` (with bookmarks); the server ends it after
        ``timeout_s``, a silent connection fails a little later. Raises :class:`ApiException`
        (e.g. 410 Gone) or a connection error."""
        self._response = _LISTERS[kind](api)(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_s,
            _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT_S, timeout_s + 30),
        )

    def events(self) -> Iterator[Obj]:
        """The watch events as decoded JSON (objects not pruned), until the server ends it."""
        with _released(self._response) as response:
            for line in iter_resp_lines(response):
                if line:
                    yield orjson.loads(line)

    def end(self) -> None:
        """End the watch from another thread (its reader sees the stream end or fail)."""
        with contextlib.suppress(RuntimeError, ValueError, OSError):
            # The stream may have ended (and its connection gone back to the pool) meanwhile.
            self._response.shutdown()


HINTS = {
    401: "hint: the API server refused the credentials (an expired token, or a kubeconfig "
    "for another cluster?)",
    403: "hint: the tuner's RBAC lacks this permission: its ServiceAccount needs the rules of "
    "charts/deployment-tuner or deploy/rbac.yaml (exactly what the tuner calls)",
}
"""What to check when the API server refuses a request."""


def api_refusal(err: ApiException) -> str:
    """One line for a refused request: the status, the API's reason, its message (for a 403:
    the user, the verb and the resource) and, for 401 and 403, a hint."""
    try:
        body = orjson.loads(err.body or b"{}")
    except (TypeError, ValueError):
        body = {}
    body = body if isinstance(body, dict) else {}
    line = f"{err.status} {body.get('reason') or err.reason or ''}".rstrip()
    if body.get("message"):
        line += f": {body['message']}"
    hint = HINTS.get(err.status or 0)
    return f"{line}; {hint}" if hint else line


def read_cluster(api: ApiClient) -> Cluster:
    """The cluster as it is now; an unreachable or refusing API server is a ServiceError."""
    try:
        parsed = {kind: list_kind(api, kind, parse_live).objects for kind in KINDS}
    except ApiException as err:
        raise ServiceError(f"kubernetes API: {api_refusal(err)}") from err
    except (urllib3.exceptions.HTTPError, OSError) as err:
        host = api.configuration.host
        raise ServiceError(f"kubernetes API unreachable at {host}: {err}") from err
    except ValueError as err:  # orjson's and msgspec's decode errors
        raise ServiceError(f"kubernetes API sent invalid JSON: {err}") from err
    return assemble(parsed, SKIP)  # unusable objects: skipped, warned
