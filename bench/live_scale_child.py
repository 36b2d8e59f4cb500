"""The daemon's cluster cache in a process of its own (for :mod:`bench.live_scale`'s peak RSS).

    python -m bench.live_scale_child SETTINGS CYCLES

Starts the cache, times its first sync, then times ``CYCLES`` cycles' read + analyse + plan on
the synced cache (as ``tuner plan`` does them); prints ``{"sync_s": …, "cycle_s": […]}``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from tuner.analyse.decision import analyse
from tuner.monitor.cache import ClusterCache
from tuner.monitor.kube import api_client
from tuner.report.build import build_report
from tuner.settings import load_settings


def main() -> None:
    settings = load_settings(Path(sys.argv[1]))
    cycles = int(sys.argv[2])
    start = time.perf_counter()
    with api_client(settings.kubernetes) as api, ClusterCache(api) as cache:
        if not cache.wait_synced(600):
            raise SystemExit(f"cache not synced: {cache.why()}")
        sync_s = time.perf_counter() - start
        cycle_s = []
        for _ in range(cycles):
            start = time.perf_counter()
            cluster = cache.cluster()
            rng = random.Random(settings.analyse.seed)
            build_report(cluster, settings, analyse(cluster, settings, [], rng))
            cycle_s.append(time.perf_counter() - start)
    print(json.dumps({"sync_s": sync_s, "cycle_s": cycle_s}))


if __name__ == "__main__":
    main()
