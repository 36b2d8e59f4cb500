"""The daemon's cluster cache in a process of its own (for :mod:`bench.live_scale`'s peak RSS).

    python -m bench.live_scale_child SETTINGS CYCLES

Loads the client's API modules (``kubernetes.client`` imports them on first use: ~1.5 s of
CPU here, once per process, whatever the cluster's size), then starts the cache and times its
first sync (wall, this process's CPU, and how long each kind's list took), then times
``CYCLES`` cycles' read + analyse + plan on the synced cache as ``tuner plan`` does them.
Before each cycle one node's label is changed through the API and the cache is waited for to
take it, so that every read assembles the cluster anew (an unchanged cache would hand back the
cluster of the last read). Prints ``{"sync_s": …, "cycle_s": […], …}``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from kubernetes import client

from tuner.analyse.decision import analyse
from tuner.monitor.cache import ClusterCache
from tuner.monitor.kube import api_client
from tuner.report.build import build_report
from tuner.settings import load_settings

API_CLASSES = ("CoreV1Api", "AppsV1Api", "BatchV1Api", "PolicyV1Api", "AutoscalingV2Api")
"""The client's API classes the cache lists with."""


def main() -> None:
    settings = load_settings(Path(sys.argv[1]))
    cycles = int(sys.argv[2])
    for api_class in API_CLASSES:
        getattr(client, api_class)
    start, cpu = time.perf_counter(), time.process_time()
    with api_client(settings.kubernetes) as api, ClusterCache(api) as cache:
        if not cache.wait_synced(600):
            raise SystemExit(f"cache not synced: {cache.why()}")
        sync_s, sync_cpu = time.perf_counter() - start, time.process_time() - cpu
        node = cache.cluster().nodes[0].name
        cycle_s, cycle_cpu = [], []
        for index in range(cycles):
            before = cache.changes
            stamp = f"{time.time_ns()}-{index}"  # a new value: an old one would change nothing
            label = {"metadata": {"labels": {"bench.tuner.dev/cycle": stamp}}}
            client.CoreV1Api(api).patch_node(node, label)
            while cache.changes == before:
                time.sleep(0.05)
            start, cpu = time.perf_counter(), time.process_time()
            cluster = cache.cluster()
            rng = random.Random(settings.analyse.seed)
            build_report(cluster, settings, analyse(cluster, settings, [], rng))
            cycle_s.append(time.perf_counter() - start)
            cycle_cpu.append(time.process_time() - cpu)
        figures = {
            "sync_s": sync_s,
            "sync_cpu_s": sync_cpu,
            "list_s": cache.list_seconds(),
            "cycle_s": cycle_s,
            "cycle_cpu_s": cycle_cpu,
        }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
