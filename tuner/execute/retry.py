"""Retries of Kubernetes API calls, and the error an action fails with.

Retried with exponential backoff (a sleep is right here: there is nothing to watch) until a
time budget is spent: 409 Conflict (the callers re-read before writing, so a retry is safe),
429 throttling, 5xx, timeouts and connection errors (an API server restarting). Anything else,
or a spent budget, becomes :class:`ActionFailed`: the action fails, the tuner never crashes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from tuner.monitor.kube import api_refusal

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({409, 429, 500, 502, 503, 504})
MAX_DELAY_S = 5.0


class ActionFailed(Exception):
    """An action could not be carried out or verified; the message says why (one line)."""


def failure(err: Exception) -> ActionFailed:
    """An exception as an action's failure (an unexpected one named by its type)."""
    return err if isinstance(err, ActionFailed) else ActionFailed(f"{type(err).__name__}: {err}")


def api_reason(err: ApiException) -> str:
    """The API's own reason (``Conflict``, ``AlreadyExists``, ``TooManyRequests``, ...)."""
    try:
        body = json.loads(err.body or "{}")
    except (TypeError, ValueError):
        body = {}
    reason = body.get("reason") if isinstance(body, dict) else None
    return str(reason or err.reason or "")


def describe(err: BaseException) -> str:
    """One line for an API or transport error."""
    if isinstance(err, ApiException):
        return api_refusal(err)
    return f"{type(err).__name__}: {err}"


def transient(err: BaseException) -> bool:
    """Worth retrying: conflict, throttling, server error, timeout or no connection."""
    if isinstance(err, ApiException):
        if err.status == 409:
            return api_reason(err) == "Conflict"
        return err.status in TRANSIENT_STATUS or err.status == 0
    return isinstance(err, urllib3.exceptions.HTTPError | OSError)


@dataclass
class Retry:
    """Calls with retries for at most ``budget_s`` seconds; stops early when ``stop`` is set."""

    budget_s: float
    stop: threading.Event = field(default_factory=threading.Event)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, retried on transient errors; :class:`ActionFailed` when it gives up."""
        deadline = time.monotonic() + self.budget_s
        delay = 0.2
        while True:
            try:
                return fn()
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
                if not transient(err) or time.monotonic() + delay > deadline:
                    raise ActionFailed(f"{what}: {describe(err)}") from err
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
