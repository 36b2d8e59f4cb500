"""Where a first sync's time goes: each kind listed one way after another, its parts timed.

    python -m bench.live_sync SETTINGS

For the pods and the nodes, and for all kinds together, three ways of listing, one after the
other in this one thread: pages of 500 from etcd (the cache's way), ``resourceVersion=0`` (the
API server's watch cache: kube-apiserver 1.33 sends every object in one response), and pages of
5,000 from etcd. For each: the wall seconds spent waiting for responses (the API server's
time and the transfer), decoding them (``orjson``, collector paused) and parsing the objects
(:func:`tuner.monitor.kube.parse_live`), plus this process's CPU seconds; then the responses'
size. Prints one JSON object. (The pruning the old cache did is gone: objects are parsed
straight from the decoded page.)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from tuner.monitor.decode import gc_paused
from tuner.monitor.kube import _LISTERS, KINDS, api_client, parse_live
from tuner.settings import load_settings

WAYS = {"etcd pages of 500": (False, 500), "watch cache (rv=0)": (True, 500)}
WAYS["etcd pages of 5000"] = (False, 5000)


def list_timed(api: Any, kind: str, from_cache: bool, limit: int) -> dict[str, float]:
    """One complete list of ``kind``, its parts timed."""
    lister = _LISTERS[kind](api)
    figures = dict.fromkeys(("response_s", "decode_s", "parse_s", "cpu_s", "mb", "pages"), 0.0)
    token = ""
    cpu = time.process_time()
    while True:
        params: dict[str, Any] = {"limit": limit, "_preload_content": False}
        if token:
            params["_continue"] = token
        elif from_cache:
            params |= {"resource_version": "0", "resource_version_match": "NotOlderThan"}
        start = time.perf_counter()
        response = lister(**params)
        data = response.data
        response.release_conn()
        got = time.perf_counter()
        with gc_paused():
            page = orjson.loads(data)
            decoded = time.perf_counter()
            for item in page.get("items") or ():
                parse_live(kind, item)
        figures["response_s"] += got - start
        figures["decode_s"] += decoded - got
        figures["parse_s"] += time.perf_counter() - decoded
        figures["mb"] += len(data) / 1e6
        figures["pages"] += 1
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            figures["cpu_s"] = time.process_time() - cpu
            return {key: round(value, 3) for key, value in figures.items()}


def main() -> None:
    api = api_client(load_settings(Path(sys.argv[1])).kubernetes)
    for kind in KINDS:  # load the client's API modules before any clock starts
        _LISTERS[kind](api)
    out: dict[str, Any] = {"load": os.getloadavg()[0]}
    for way, (from_cache, limit) in WAYS.items():
        per_kind = {kind: list_timed(api, kind, from_cache, limit) for kind in KINDS}
        total = {key: round(sum(f[key] for f in per_kind.values()), 3) for key in per_kind["Pod"]}
        out[way] = {"Pod": per_kind["Pod"], "Node": per_kind["Node"], "all kinds": total}
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
