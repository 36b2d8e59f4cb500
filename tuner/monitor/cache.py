"""A watch-backed cache of the cluster for the daemon: list once, then follow watches.

One daemon thread per kind (:data:`~tuner.monitor.kube.KINDS`) lists the kind (in pages of
500; ``from_cache=True`` asks the API server's watch cache instead, see
:func:`~tuner.monitor.kube.list_kind`), then watches it from the list's resourceVersion with
bookmarks, applying each event to its store. A store holds each object parsed alone
(:func:`~tuner.monitor.kube.parse_live`: parsed once, in the watcher thread, when its event
arrives; replaced on MODIFIED, dropped on DELETED, every object parsed again on a relist),
never the API object itself. A dropped connection or an API server restart resumes the watch
from the last resourceVersion seen (after a short back-off); a ``410 Gone`` (that version is
older than the server's watch cache holds, e.g. after a restart) lists the kind again and
replaces its store.

Usage::

    cache = ClusterCache(api)
    cache.start()
    cluster = cache.cluster(timeout_s=60)   # waits until every kind is synced
    cache.stop()

:meth:`ClusterCache.cluster` copies the stores' parsed values under the cache's lock (a
consistent snapshot: no event half-applied) and joins them with
:func:`~tuner.monitor.dump.assemble` — owners, templates, budgets, duplicates — as
:func:`~tuner.monitor.dump.cluster_from_objects` joins a dump's, so the cluster is the one a
dump of the same objects gives. It never answers from a cache that is not synced: a kind that
has not been listed yet, or whose watch has been failing for longer than ``stale_after_s``,
makes it wait, then raise a :class:`~tuner.errors.ServiceError` naming the kinds and the last error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from tuner.errors import ServiceError
from tuner.model.cluster import Cluster
from tuner.monitor.decode import gc_paused
from tuner.monitor.dump import Parsed, assemble
from tuner.monitor.kube import (
    KINDS,
    SKIP,
    Listing,
    WatchStream,
    api_refusal,
    list_kind,
    parse_live,
)
from tuner.monitor.owners import Followed

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 240
"""Longest single watch request; the server ends it and the watcher resumes."""

SYNC_TIMEOUT_S = 120.0
"""How long a read waits for the cache to be synced before giving up."""

GONE = 410

Store = dict[str, Parsed]
"""The objects of one kind, each parsed alone, by uid."""

Entry = tuple[str, Parsed]
"""An object's key in its store and the object parsed."""


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): the kind must be listed again."""


def object_key(obj: Mapping[str, Any]) -> str:
    """An object's identity in a store: its uid, else namespace/name."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    uid = meta.get("uid")
    return str(uid) if uid else f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _version(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return str(version) if version else None


class Applied(NamedTuple):
    """What an event did: the resourceVersion it carries, and whether the store changed."""

    version: str | None
    changed: bool


def apply_event(store: Store, kind: str, event: Mapping[str, Any]) -> Applied:
    """Apply one watch event (decoded JSON) to ``store``.

    ADDED/MODIFIED put the object parsed, DELETED removes it, BOOKMARK only moves the version;
    an update of fields no parser reads (e.g. a node's heartbeat) changes nothing. An ERROR
    event raises :class:`Expired` for 410 Gone, else :class:`ApiException`.
    """
    kind_of_event = event.get("type")
    obj = event.get("object")
    if not isinstance(obj, Mapping):
        raise ValueError(f"watch event {kind_of_event!r} without an object")
    if kind_of_event == "ERROR":
        code = obj.get("code")
        if code == GONE:
            raise Expired(str(obj.get("message", "resource version too old")))
        raise ApiException(status=code, reason=str(obj.get("message", "watch error")))
    key = object_key(obj)
    changed = False
    if kind_of_event in ("ADDED", "MODIFIED"):
        new = parse_live(kind, obj)
        changed = store.get(key) != new
        store[key] = new
    elif kind_of_event == "DELETED":
        changed = store.pop(key, None) is not None
    return Applied(_version(obj), changed)


def entry(kind: str, obj: Mapping[str, Any]) -> Entry:
    """A listed object's key and the object parsed (how :func:`list_kind` converts for us)."""
    return object_key(obj), parse_live(kind, obj)


def cluster_of(stores: Mapping[str, Store], followed: Followed | None = None) -> Cluster:
    """The cluster of the stores' parsed objects (by kind), as a dump of them would give it
    (``followed``: see :func:`~tuner.monitor.dump.assemble`). The cyclic garbage collector
    is paused meanwhile: its passes over the stores cost more than the assembly."""
    with gc_paused():
        return assemble({kind: store.values() for kind, store in stores.items()}, SKIP, followed)


@dataclass
class KindState:
    """What the cache knows of one kind (guarded by the cache's lock)."""

    kind: str
    store: Store
    version: str = ""
    listed: bool = False
    failing_since: float | None = None
    watch: WatchStream | None = None
    last_error: str = ""
    lists: int = 0
    events: int = 0
    list_s: float = 0.0
    """How long its last list took (requests, decoding and parsing)."""


class ClusterCache:
    """The cluster kept current by one list+watch thread per kind; see the module docs."""

    def __init__(
        self,
        api: ApiClient,
        kinds: Iterable[str] = KINDS,
        *,
        watch_timeout_s: int = WATCH_TIMEOUT_S,
        backoff_s: float = 1.0,
        stale_after_s: float = 30.0,
        from_cache: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self.stale_after_s = stale_after_s
        self.from_cache = from_cache
        self._clock = clock
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._states = {kind: KindState(kind, {}) for kind in kinds}
        self._threads: list[threading.Thread] = []
        self._generation = 0  # bumped by every change of a store
        self._parsed: tuple[int, Cluster] | None = None
        self._assembly = threading.Lock()  # one read assembles at a time (its Followed)
        self._followed = Followed()

    # ------------------------------------------------------------ lifecycle --
    def start(self) -> None:
        """Start one daemon thread per kind (returns at once; see :meth:`wait_synced`)."""
        for kind in self._states:
            thread = threading.Thread(
                target=self._follow, args=(kind,), name=f"cache-{kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the threads to stop; each ends at its next event or watch timeout at the latest
        (daemon threads: they never keep the process alive)."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
            for state in self._states.values():
                if state.watch is not None:
                    state.watch.end()
        deadline = self._clock() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - self._clock()))

    def __enter__(self) -> ClusterCache:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- reads --
    def wait_synced(self, timeout_s: float) -> bool:
        """Block until every kind is listed and its watch healthy (True), or ``timeout_s``."""
        deadline = self._clock() + timeout_s
        with self._changed:
            while not self._synced():
                remaining = deadline - self._clock()
                if remaining <= 0 or self._stop.is_set():
                    return False
                self._changed.wait(min(remaining, 1.0))
            return True

    def cluster(self, timeout_s: float = SYNC_TIMEOUT_S) -> Cluster:
        """The cluster as the cache has it now; a :class:`ServiceError` when the cache is not
        synced within ``timeout_s``. The same immutable value again while nothing changed."""
        with self._changed:  # reentrant: waiting releases it, the copy holds it
            if not self.wait_synced(timeout_s):
                raise ServiceError(
                    f"kubernetes cache not synced after {timeout_s:g} s: {self.why()}"
                )
            generation, parsed = self._generation, self._parsed
            if parsed is not None and parsed[0] == generation:
                return parsed[1]
            stores = {kind: dict(state.store) for kind, state in self._states.items()}
        with self._assembly:
            cluster = cluster_of(stores, self._followed)
        with self._changed:
            self._parsed = (generation, cluster)
        return cluster

    def why(self) -> str:
        """The kinds that are not synced and why (empty when synced)."""
        with self._changed:
            return "; ".join(
                f"{state.kind} {'failing' if state.listed else 'not listed yet'}"
                + (f" ({state.last_error})" if state.last_error else "")
                for state in self._states.values()
                if not self._healthy(state)
            )

    @property
    def changes(self) -> int:
        """How many changes the stores have taken (a read after a change assembles anew)."""
        with self._changed:
            return self._generation

    def list_seconds(self) -> dict[str, float]:
        """Kind -> seconds its last list took (where a first sync's time went)."""
        with self._changed:
            return {kind: state.list_s for kind, state in self._states.items()}

    def counts(self) -> dict[str, tuple[int, int, int]]:
        """Kind -> (objects, lists done, events applied): how the cache got where it is."""
        with self._changed:
            return {
                kind: (len(state.store), state.lists, state.events)
                for kind, state in self._states.items()
            }

    def _synced(self) -> bool:
        return all(self._healthy(state) for state in self._states.values())

    def _healthy(self, state: KindState) -> bool:
        failing = state.failing_since
        return state.listed and (failing is None or self._clock() - failing < self.stale_after_s)

    # -------------------------------------------------------------- threads --
    def _follow(self, kind: str) -> None:
        """List, then watch until stopped; relist on 410 Gone, resume after other failures."""
        state = self._states[kind]
        relist = True
        while not self._stop.is_set():
            try:
                if relist:
                    started = self._clock()
                    listing = list_kind(self.api, kind, entry, from_cache=self.from_cache)
                    state.list_s = self._clock() - started
                    self._replace(state, listing)
                    relist = False
                self._watch(state)
            except Expired as err:
                log.info("%s watch expired (%s): listing again", kind, err)
                relist = True
            except ApiException as err:
                relist = err.status == GONE
                self._failed(state, api_refusal(err))
            except (urllib3.exceptions.HTTPError, OSError, ValueError, ServiceError) as err:
                self._failed(state, f"{type(err).__name__}: {err}")
            except Exception as err:
                # A bug must not leave the kind silently frozen: it turns stale, then relists.
                log.exception("%s watcher failed", kind)
                relist = True
                self._failed(state, f"{type(err).__name__}: {err}")

    def _replace(self, state: KindState, listing: Listing[Entry]) -> None:
        store = dict(listing.objects)
        with self._changed:
            state.store = store
            state.version = listing.version
            state.listed = True
            state.lists += 1
            self._generation += 1
            self._recovered(state)
            self._changed.notify_all()
        log.debug("%s listed: %d objects at %s", state.kind, len(store), listing.version)

    def _watch(self, state: KindState) -> None:
        """One watch request, applied event by event until the server ends it."""
        stream = WatchStream(self.api, state.kind, state.version, self.watch_timeout_s)
        with self._changed:
            state.watch = stream
            self._recovered(state)
        if self._stop.is_set():
            stream.end()
        try:
            for event in stream.events():
                if self._stop.is_set():
                    return
                with self._changed:
                    applied = apply_event(state.store, state.kind, event)
                    state.version = applied.version or state.version
                    state.events += 1
                    self._generation += applied.changed
        finally:
            with self._changed:
                state.watch = None

    def _recovered(self, state: KindState) -> None:
        if state.failing_since is not None:
            state.failing_since = None
            state.last_error = ""
            self._changed.notify_all()

    def _failed(self, state: KindState, why: str) -> None:
        if self._stop.is_set():
            return  # the watch was ended on purpose
        with self._changed:
            if state.failing_since is None:
                state.failing_since = self._clock()
            state.last_error = why
        log.warning("%s watch failed (%s): retrying in %g s", state.kind, why, self.backoff_s)
        self._stop.wait(self.backoff_s)
