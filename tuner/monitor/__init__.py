"""Monitor: where the cluster state and the load come from, and whether a window was stable.

- :mod:`~tuner.monitor.dump`, :mod:`~tuner.monitor.kube`: the cluster from a dump or the API;
- :mod:`~tuner.monitor.observe`: :func:`~tuner.monitor.observe.observe_window`, the one call
  the daemon makes per cycle (verdict, reason and load of a window);
- pure core: :mod:`~tuner.monitor.window` (windows, steps), :mod:`~tuner.monitor.load` (the load
  and how loads compare), :mod:`~tuner.monitor.evidence` (kube-state-metrics probes and the
  evidence they give), :mod:`~tuner.monitor.stability` (verdicts);
- adapters: :mod:`~tuner.monitor.prometheus` (PromQL over HTTP),
  :mod:`~tuner.monitor.snapshots` (API snapshots over time, the fallback).
"""
