"""Replay a simulator scenario on the project's real control plane (kube-apiserver,
kube-controller-manager with its HPA controller, kube-scheduler, KWOK nodes, metrics-server,
optionally Karpenter's KWOK provider and the tuner's daemon) and record what the simulator
records, so that the two can be compared on the same input (``bench/replay.py``, the
``cluster``-marked smoke test ``tests/cluster/test_replay.py``, ``docs/fidelity.md``).

- :mod:`.objects`: a scenario as API objects (namespaces, workloads, HPAs, PDBs, DaemonSets,
  KWOK nodes, Karpenter's instance types, KWOKNodeClass, NodePool, NodeClaims): pure.
- :mod:`.drive`: the load driver, which writes each pod's CPU usage (KWOK's resource-usage
  simulation) from the scenario's load, and the recorder, which samples the cluster every tick.
- :mod:`.run`: one replay end to end on a private control plane.
- :mod:`.compare`: simulator against real: the figures, their differences, the plots.
"""
