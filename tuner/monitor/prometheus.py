"""The Prometheus adapter: PromQL in, :class:`~tuner.monitor.series.Series` out.

A thin layer over ``prometheus-api-client``. Every failure — connection refused, timeout, an
HTTP error, a PromQL error, an answer of an unexpected shape — becomes a :class:`QueryError`
naming the query, so the monitor can report the window as unknown and say which query failed.
The bearer token, if any, comes from the environment variable named by
``prometheus.token_env``.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType, TracebackType
from typing import Any, Protocol

import requests
import urllib3
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from tuner.monitor.series import Point, Series
from tuner.redact import redact_url
from tuner.settings import Prometheus as PrometheusSettings

InstantResult = tuple[Series, ...] | float
"""An instant vector, or the value of a PromQL scalar."""


class QueryError(Exception):
    """A query could not be answered; ``str()`` is one line naming the query."""

    def __init__(self, query: str, message: str) -> None:
        super().__init__(f"{message} (query: {query})")
        self.query = query
        self.message = message


class Queries(Protocol):
    """What the monitor needs from Prometheus."""

    def instant(self, query: str, at: float) -> InstantResult:
        """Evaluate ``query`` at ``at`` (epoch seconds)."""
        ...

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        """Evaluate ``query`` at ``start``, ``start + step``, ... up to ``end``."""
        ...


class PrometheusClient:
    """:class:`Queries` over the Prometheus HTTP API. Use as a context manager or close()."""

    def __init__(
        self, settings: PrometheusSettings, environ: Mapping[str, str] = os.environ
    ) -> None:
        url = settings.url.rstrip("/")  # an http(s) URL of a host: checked with the settings
        token = environ.get(settings.token_env, "").strip()
        self.url = redact_url(url)
        """The URL without credentials: the one messages show."""
        self.timeout_s = settings.timeout_s
        self._connect = PrometheusConnect(
            url=url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            # One quick retry of a refused/reset connection or a 502-504; a timeout is final.
            retry=Retry(
                total=1,
                read=0,
                backoff_factor=0.2,
                status_forcelist=(502, 503, 504),
                allowed_methods=("GET",),
                raise_on_status=False,
            ),
            timeout=settings.timeout_s,  # type: ignore[arg-type]  # annotated int, takes float
        )

    def close(self) -> None:
        """Release the HTTP connections."""
        self._connect.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ queries

    def instant(self, query: str, at: float) -> InstantResult:
        """Evaluate ``query`` at ``at``: an instant vector or a scalar."""
        params = {"time": _ts(at), "timeout": self._server_timeout()}
        result = self._call(query, lambda: self._connect.custom_query(query, params=params))
        if isinstance(result, list) and len(result) == 2 and not isinstance(result[0], dict):
            # A scalar or string answer is [time, "value"] (the client drops the resultType).
            value = _number(result[1])
            if value is None:
                raise QueryError(query, f"answered a string ({result[1]!r}), not a number")
            return value
        vector = _series_list(query, result, "value")
        if any(len(s.points) != 1 for s in vector):
            raise QueryError(query, "answered a range vector; wrap it in rate() or *_over_time()")
        return vector

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        """Evaluate ``query`` at every step from ``start`` to ``end``."""
        # The client rounds start/end to whole seconds; exact times go in params (they win).
        params = {"start": _ts(start), "end": _ts(end), "timeout": self._server_timeout()}
        result = self._call(
            query,
            lambda: self._connect.custom_query_range(
                query,
                start_time=datetime.fromtimestamp(start, UTC),
                end_time=datetime.fromtimestamp(end, UTC),
                step=f"{max(1, round(step * 1000))}ms",  # seconds as a float may lose 1 ms
                params=params,
            ),
        )
        return _series_list(query, result, "values")

    def _server_timeout(self) -> str:
        return f"{max(1, math.floor(self.timeout_s * 1000))}ms"

    def _call(self, query: str, call: Any) -> Any:
        try:
            return call()
        except requests.exceptions.JSONDecodeError:
            raise QueryError(query, f"unexpected answer from {self.url}: not JSON") from None
        except RecursionError:  # the JSON decoder's, on an answer nested 100,000 deep
            raise QueryError(query, f"unexpected answer from {self.url}: nested too deep") from None
        except requests.exceptions.RequestException as err:
            if _timed_out(err):
                message = f"Prometheus at {self.url} did not answer within {self.timeout_s:g} s"
            elif isinstance(err, requests.exceptions.ConnectionError):
                message = f"Prometheus unreachable at {self.url}: {_root_cause(err)}"
            else:
                message = f"request to Prometheus at {self.url} failed: {_root_cause(err)}"
            raise QueryError(query, message) from None
        except PrometheusApiClientException as err:
            raise QueryError(query, f"Prometheus refused the query: {_api_error(err)}") from None
        except (ValueError, KeyError, TypeError) as err:
            raise QueryError(
                query, f"unexpected answer from {self.url} ({type(err).__name__}: {err})"
            ) from None


def _ts(t: float) -> str:
    """RFC 3339 with milliseconds: Prometheus parses it exactly (a float may lose 1 ms)."""
    millis = round(t * 1000)
    stamp = datetime.fromtimestamp(millis // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{millis % 1000:03d}Z"


def _number(raw: Any) -> float | None:
    """A sample's number (``"+Inf"`` and ``"NaN"`` included); None when not a number or an
    integer too large for a float (a timestamp of 401 digits)."""
    try:
        return float(raw)
    except (TypeError, ValueError, OverflowError):
        return None


def _series_list(query: str, result: Any, key: str) -> tuple[Series, ...]:
    """Convert the API's ``[{"metric": {...}, key: ...}]`` into series; QueryError otherwise."""
    if not isinstance(result, list):
        raise QueryError(query, f"unexpected answer: {type(result).__name__}, not a list")
    out = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise QueryError(query, f"unexpected series in the answer: {item!r:.200}")
        raw = item.get(key)
        if raw is None:
            other = "value" if key == "values" else "values"
            if other in item:
                raise QueryError(
                    query, "answered a range vector; wrap it in rate() or *_over_time()"
                )
            raise QueryError(query, f"series without {key!r}: {item!r:.200}")
        samples = [raw] if key == "value" else raw
        points: list[Point] = []
        for sample in samples:
            pair = sample if isinstance(sample, list | tuple) and len(sample) == 2 else (None, None)
            at, value = _number(pair[0]), _number(pair[1])
            if at is None or value is None or not math.isfinite(at):
                raise QueryError(query, f"unexpected sample {sample!r:.100}")
            points.append((at, value))
        labels = {str(k): str(v) for k, v in item["metric"].items()}
        out.append(Series(MappingProxyType(labels), tuple(points)))
    return tuple(out)


def _api_error(err: PrometheusApiClientException) -> str:
    """``HTTP 400: bad_data: 1:5: parse error ...`` from the client's message."""
    text = str(err)
    match = re.match(r"HTTP Status Code (\d+) \((.*)\)$", text, re.DOTALL)
    if not match:
        return text
    code, body = match.group(1), match.group(2)
    try:
        raw = ast.literal_eval(body)
    except (ValueError, SyntaxError):
        raw = body
    content = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    try:
        payload = json.loads(content)
    except (ValueError, RecursionError):
        payload = None
    if isinstance(payload, dict) and "error" in payload:
        return f"HTTP {code}: {payload.get('errorType', 'error')}: {payload['error']}"
    return f"HTTP {code}: {' '.join(content.split())[:200]}"


def _causes(err: BaseException) -> list[BaseException]:
    """The exception and what it wraps (``reason``, first argument, ``__cause__``)."""
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and current not in chain:
        chain.append(current)
        reason = getattr(current, "reason", None)
        first = current.args[0] if current.args else None
        current = (
            reason
            if isinstance(reason, BaseException)
            else first
            if isinstance(first, BaseException)
            else current.__cause__
        )
    return chain


def _timed_out(err: BaseException) -> bool:
    causes = _causes(err)
    # urllib3's NewConnectionError (refused, no route) subclasses its ConnectTimeoutError.
    if any(isinstance(e, urllib3.exceptions.NewConnectionError) for e in causes):
        return False
    timeouts = requests.exceptions.Timeout | urllib3.exceptions.TimeoutError | TimeoutError
    return any(isinstance(e, timeouts) for e in causes)


def _root_cause(err: BaseException) -> str:
    """The innermost reason (e.g. ``Connection refused``), not urllib3's nested repr."""
    text = str(_causes(err)[-1])
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    return match.group(1).strip() if match else text
