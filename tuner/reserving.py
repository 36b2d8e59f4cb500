"""Each cycle's forecast and reserve: the load expected over the next horizon
(:func:`forecast_at`), the forecast a reserve is planned by (:func:`reserve_forecast`), and the
room its rise asks for (:func:`~tuner.plan.reserve.plan_reserve`), held by the cycle's
:class:`~tuner.cycle.ReserveKeeper` unless in a dry run (which only reports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.model.cluster import Cluster
from tuner.model.forecast import Forecast, forecast_from
from tuner.model.pools import discover
from tuner.model.reserve import Reserve, ReserveOutcome
from tuner.plan.reserve import plan_reserve
from tuner.settings import Settings

if TYPE_CHECKING:
    from tuner.cycle import Actuator, LoadHistory, ReserveKeeper


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


def forecast_at(
    history: LoadHistory | None, settings: Settings, now: float
) -> tuple[Forecast | None, str | None]:
    """The load forecast for the horizon after ``now`` (:func:`forecast_from`); (None, None)
    without a history."""
    return (None, None) if history is None else forecast_from(settings, history.series, now)


def reserve_forecast(
    history: LoadHistory | None, settings: Settings, now: float, forecast: Forecast | None
) -> Forecast | None:
    """The forecast a reserve is planned by: the cycle's ``forecast`` (None: made here), or,
    with reserving on, one that may also rest on the load's own period
    (:func:`~tuner.model.period.detect_period`): it foresees a rise with under a day of
    history; where the load shows none, it is the cycle's ``forecast`` itself. The release
    keeps the cycle's forecast (a period's band, measured over a few cycles, is wide: as
    headroom it held the nodes through the troughs)."""
    if history is None or settings.forecast.reserve_max_nodes <= 0:
        return forecast if forecast is not None else forecast_at(history, settings, now)[0]
    return forecast_from(settings, history.series, now, own_period=True, plain=forecast)[0]
