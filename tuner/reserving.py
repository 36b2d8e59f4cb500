"""Each cycle's reserve: the room the forecast's rise asks for
(:func:`~tuner.plan.reserve.plan_reserve`), held by the cycle's
:class:`~tuner.cycle.ReserveKeeper` unless in a dry run (which only reports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.model.cluster import Cluster
from tuner.model.forecast import Forecast
from tuner.model.pools import discover
from tuner.model.reserve import Reserve, ReserveOutcome
from tuner.plan.reserve import plan_reserve
from tuner.settings import Settings

if TYPE_CHECKING:
    from tuner.cycle import Actuator, ReserveKeeper


def reserve_at(
    now: float,
    settings: Settings,
    forecast: Forecast | None,
    actuator: Actuator,
    keeper: ReserveKeeper | None,
    *,
    dry_run: bool,
) -> tuple[Reserve | None, ReserveOutcome | None]:
    """The reserve ``forecast`` asks for (None without a keeper, unless in a dry run) and what
    the keeper did holding it (None in a dry run); the actuator reads the cluster only when
    there is a forecast and reserving is on."""
    if keeper is None and not dry_run:
        return None, None
    off = forecast is None or settings.forecast.reserve_max_nodes <= 0
    cluster = Cluster((), ()) if off else actuator.read()
    reserve = plan_reserve(cluster, discover(cluster, settings), forecast, settings, now)
    return reserve, None if dry_run or keeper is None else keeper.hold(reserve, now)
