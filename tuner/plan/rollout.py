"""What a Deployment's rolling update does at once, as the Deployment controller resolves it:
how many pods it adds above the desired count (``maxSurge``) and how many it takes out of
service (``maxUnavailable``), each an absolute number or a percentage of the replicas (25 %
each by default), ``maxSurge`` rounded up and ``maxUnavailable`` down, and one unavailable
allowed when both come to 0 (``ResolveFenceposts`` in kubernetes' ``pkg/controller/deployment/
util``).

A **surge move** replaces a one-replica Deployment's pod by restarting its rollout
(:func:`surges_first`): with a surge of one and nothing unavailable, the controller starts the
new pod and deletes the old one only once the new one is available, so the workload is served
throughout, where an eviction leaves it without a pod until its replacement starts. The HPA
is not in the way: the replica count never changes (a scale-up by one would be undone by the
HPA's next sync, which deletes the unready new pod first).
"""

from __future__ import annotations

import math

ROLLOUT_DEFAULT = "25%"
"""A Deployment's ``maxSurge`` and ``maxUnavailable`` when it sets none."""


def resolved(value: int | str | None, replicas: int, *, up: bool) -> int | None:
    """``value`` (None: :data:`ROLLOUT_DEFAULT`) of ``replicas`` pods: an absolute number, or a
    percentage rounded up (``up``) or down; None when it is neither."""
    value = ROLLOUT_DEFAULT if value is None else value
    if isinstance(value, int):
        return max(value, 0)
    number = value.removesuffix("%")
    if number == value:
        return None
    try:
        share = int(number)
    except ValueError:
        return None
    exact = share * max(replicas, 0) / 100
    return max(math.ceil(exact - 1e-9) if up else math.floor(exact + 1e-9), 0)


def fenceposts(
    max_surge: int | str | None, max_unavailable: int | str | None, replicas: int
) -> tuple[int, int] | None:
    """(pods added above the desired count, pods out of service) at once in a rollout of
    ``replicas``; None when either value is not one the API admits."""
    surge = resolved(max_surge, replicas, up=True)
    unavailable = resolved(max_unavailable, replicas, up=False)
    if surge is None or unavailable is None:
        return None
    if surge == 0 and unavailable == 0:
        return 0, 1
    return surge, unavailable


def surges_first(
    strategy: str | None,
    max_surge: int | str | None,
    max_unavailable: int | str | None,
    replicas: int,
    paused: bool,
) -> bool:
    """Whether a restart of a Deployment of ``replicas`` replaces its pod before the old one
    goes (a surge move, see the module): one replica, a ``RollingUpdate`` (None: the default)
    not paused, a surge of at least one and none unavailable."""
    if paused or replicas != 1 or strategy not in (None, "RollingUpdate"):
        return False
    posts = fenceposts(max_surge, max_unavailable, replicas)
    return posts is not None and posts[0] >= 1 and posts[1] == 0
