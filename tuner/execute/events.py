"""Kubernetes Events: what the tuner decided and did, where ``kubectl`` shows it.

Written through ``events.k8s.io/v1`` (``EventsV1Api.create_namespaced_event``), not the legacy
core/v1 Event API: a v1 Event names the object acted on (``regarding``) and the one the action
involved (``related``: a destination node), the controller and the replica reporting
(``reportingController``, ``reportingInstance``) and the ``action`` taken, with a microsecond
``eventTime``; it is the API of client-go's current event recorder, which kube-scheduler uses.
The API server serves every Event in both versions, so ``kubectl get events``, ``kubectl events``
and ``kubectl describe`` show these as well.

An event about a pod or a Deployment goes to the object's namespace, where ``kubectl describe``
looks; an event about a node goes to ``default`` with the node's name as its uid, as the kubelet
records them, so ``kubectl describe node`` shows it.

Best effort: one request, no retries, a short timeout; a refusal or an unreachable API server
is logged as a warning and never fails an action or a cycle. Only acting code calls this: a dry
run records no Event (it makes no mutating request).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import urllib3
from kubernetes import client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from tuner.execute.retry import describe

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10
NAME_LIMIT = 253
NOTE_LIMIT = 1024
"""Bytes, the API's limit on ``note``."""
INSTANCE_LIMIT = 128
CLUSTER_SCOPED_NAMESPACE = "default"


@dataclass(frozen=True)
class Ref:
    """An object an Event is about (an ObjectReference); ``namespace`` is empty for a
    cluster-scoped object, ``uid`` when unknown."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    @staticmethod
    def node(name: str) -> Ref:
        """A node, with its name as uid (the kubelet's convention ``kubectl describe`` uses)."""
        return Ref("v1", "Node", name, uid=name)

    def to_json(self) -> dict[str, str]:
        """The ObjectReference in API JSON form (empty fields left out)."""
        fields = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
        }
        return {key: value for key, value in fields.items() if value}


def identity(env: str) -> str:
    """This replica's name: the environment variable ``env`` (the pod name in a cluster),
    else the host name. Leader election and ``reportingInstance`` use it."""
    return os.environ.get(env) or socket.gethostname()


@dataclass(frozen=True)
class Event:
    """What one Event says."""

    regarding: Ref
    action: str
    """What was done, e.g. ``Migrate``."""
    reason: str
    """How it went, e.g. ``Migrated`` or ``MigrationFailed`` (CamelCase)."""
    note: str
    warning: bool = False
    related: Ref | None = None

    def body(self, controller: str, instance: str, stamp_ns: int) -> dict[str, Any]:
        """The ``events.k8s.io/v1`` Event, in API JSON form, as of ``stamp_ns``."""
        name = self.regarding.name[: NAME_LIMIT - 17].rstrip("-.")
        when = datetime.fromtimestamp(stamp_ns / 1e9, UTC)
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{stamp_ns:x}", "namespace": self.namespace},
            "eventTime": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": controller,
            "reportingInstance": instance[:INSTANCE_LIMIT],
            "action": self.action,
            "reason": self.reason,
            "note": self.note.encode()[:NOTE_LIMIT].decode(errors="ignore"),
            "type": "Warning" if self.warning else "Normal",
            "regarding": self.regarding.to_json(),
        }
        if self.related is not None:
            body["related"] = self.related.to_json()
        return body

    @property
    def namespace(self) -> str:
        """Where the Event is stored: the regarding object's namespace, or ``default``."""
        return self.regarding.namespace or CLUSTER_SCOPED_NAMESPACE


class Sink(Protocol):
    """Where the executor's Events go (:class:`Recorder`; a list in unit tests)."""

    def record(self, event: Event) -> None:
        """Record the Event; never raises."""


class Recorder:
    """Records Events as ``controller`` (e.g. ``tuner.dev/deployment-tuner``) from replica
    ``instance``; never raises."""

    def __init__(self, api: ApiClient, controller: str, instance: str) -> None:
        self.api: Any = client.EventsV1Api(api)
        self.controller = controller
        self.instance = instance

    def record(self, event: Event) -> None:
        """Create the Event; a failure is logged as a warning."""
        body = event.body(self.controller, self.instance, time.time_ns())
        try:
            self.api.create_namespaced_event(
                event.namespace, body, _request_timeout=REQUEST_TIMEOUT_S
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
            regarding = event.regarding
            log.warning(
                "event %s about %s %s not recorded: %s",
                event.reason,
                regarding.kind,
                f"{regarding.namespace}/{regarding.name}".lstrip("/"),
                describe(err),
            )
