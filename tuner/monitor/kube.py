"""The live cluster through the official ``kubernetes`` client (kubeconfig, context or in-cluster).

Objects are listed with the typed API, converted to their JSON form and parsed by the same code
as an offline dump, so both sources always agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import urllib3
import yaml  # type: ignore[import-untyped]
from kubernetes import client, config
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from tuner.errors import InputError, ServiceError
from tuner.model.cluster import Cluster
from tuner.monitor.dump import cluster_from_objects
from tuner.settings import Kubernetes


def api_client(settings: Kubernetes) -> ApiClient:
    """An API client configured from settings (in-cluster, or a kubeconfig and context)."""
    configuration = client.Configuration()
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
        configuration.host = settings.api_server
    return ApiClient(configuration)


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


# (kind, how to list it across namespaces)
_LISTS: tuple[tuple[str, Callable[[ApiClient], Callable[..., Any]]], ...] = (
    ("Node", lambda c: client.CoreV1Api(c).list_node),
    ("Pod", lambda c: client.CoreV1Api(c).list_pod_for_all_namespaces),
    ("Deployment", lambda c: client.AppsV1Api(c).list_deployment_for_all_namespaces),
    ("ReplicaSet", lambda c: client.AppsV1Api(c).list_replica_set_for_all_namespaces),
    ("StatefulSet", lambda c: client.AppsV1Api(c).list_stateful_set_for_all_namespaces),
    ("DaemonSet", lambda c: client.AppsV1Api(c).list_daemon_set_for_all_namespaces),
    ("Job", lambda c: client.BatchV1Api(c).list_job_for_all_namespaces),
    (
        "PodDisruptionBudget",
        lambda c: client.PolicyV1Api(c).list_pod_disruption_budget_for_all_namespaces,
    ),
    (
        "HorizontalPodAutoscaler",
        lambda c: client.AutoscalingV2Api(c).list_horizontal_pod_autoscaler_for_all_namespaces,
    ),
)


def list_objects(api: ApiClient) -> Iterable[dict[str, Any]]:
    """Every object the tuner reads, in JSON form with its ``kind`` (reads only)."""
    for kind, lister in _LISTS:
        for item in lister(api)().items:
            obj: dict[str, Any] = api.sanitize_for_serialization(item)
            obj["kind"] = kind
            yield obj


def read_cluster(api: ApiClient) -> Cluster:
    """The cluster as it is now; an unreachable or refusing API server is a ServiceError."""
    try:
        objects = list(list_objects(api))
    except ApiException as err:
        raise ServiceError(f"kubernetes API: {err.status} {err.reason}") from err
    except (urllib3.exceptions.HTTPError, OSError) as err:
        host = api.configuration.host
        raise ServiceError(f"kubernetes API unreachable at {host}: {err}") from err
    return cluster_from_objects(objects, strict=False)  # unusable objects: skipped, warned
