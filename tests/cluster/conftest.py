"""Helpers shared by the end-to-end tests on the real control plane."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.cluster_fixture import ClusterHarness
from tuner.execute.actuator import KubeActuator
from tuner.model.cluster import Pod
from tuner.monitor.kube import read_cluster
from tuner.settings import settings_from_dict


def model_pod(kube: ClusterHarness, name: str) -> Pod:
    """The tuner's view of a live pod."""
    cluster = read_cluster(kube.api)
    return next(p for p in cluster.pods if p.name == name and p.namespace == kube.namespace)


@pytest.fixture
def actuator(kube: ClusterHarness) -> KubeActuator:
    """An actuator on the test cluster with short timeouts."""
    return make_actuator(kube)


def make_actuator(kube: ClusterHarness, **execute: Any) -> KubeActuator:
    """An actuator with extra ``execute`` settings."""
    return KubeActuator(kube.api, settings_from_dict(kube.settings_doc(**execute)))
