"""Wait for a condition on a set of objects with a list + watch, never by polling with sleeps.

The objects are listed once, then watched from the list's resourceVersion; the condition is
evaluated on the whole set after every event. A broken watch (410 Gone, an API server restart,
a dropped connection) is followed by a fresh list, so waiting survives a restarting API server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from tuner.execute.retry import Retry

WATCH_CHUNK_S = 5
"""Longest single watch request: the stop flag and the deadline are checked this often."""


@dataclass(frozen=True)
class Verification:
    """A condition's answer: done (ok or failed, with why)."""

    ok: bool
    reason: str
    node: str | None = None
    """The node the awaited pod is on, when the condition is about one."""
    ready_on: tuple[tuple[str, str], ...] = ()
    """(name, node) of each awaited new pod verified Ready, when the condition awaits new pods
    (:func:`~tuner.execute.checks.new_pod_on`)."""


Check = Callable[[Mapping[str, Any]], Verification | None]
"""Objects by uid -> a verification, or None to keep waiting."""


def wait_until(
    lister: Callable[..., Any],
    check: Check,
    *,
    timeout_s: float,
    retry: Retry,
    what: str,
    **selectors: Any,
) -> Verification:
    """Evaluate ``check`` on the objects ``lister(**selectors)`` returns until it decides.

    Gives a failed verdict on timeout or when ``retry.stop`` is set.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        listing = retry.call(f"list {what}", lambda: lister(**selectors))
        objects = {item.metadata.uid: item for item in listing.items}
        verdict = check(objects)
        if verdict is not None:
            return verdict
        version = listing.metadata.resource_version
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return Verification(
                        False, f"timed out after {timeout_s:g} s waiting for {what}"
                    )
                if retry.stop.is_set():
                    return Verification(False, f"stop requested while waiting for {what}")
                chunk = max(1, min(WATCH_CHUNK_S, int(remaining) + 1))
                stream = watch.Watch().stream(
                    lister,
                    resource_version=version,
                    timeout_seconds=chunk,
                    _request_timeout=chunk + 5,
                    **selectors,
                )
                for event in stream:
                    if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    item = event["object"]
                    version = item.metadata.resource_version
                    if event["type"] == "DELETED":
                        objects.pop(item.metadata.uid, None)
                    else:
                        objects[item.metadata.uid] = item
                    verdict = check(objects)
                    if verdict is not None:
                        return verdict
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError):
            # Watch expired or connection lost: list again (the list call retries).
            if time.monotonic() >= deadline:
                return Verification(False, f"timed out after {timeout_s:g} s waiting for {what}")
