"""A discrete-time cluster simulator for measuring what the tuner saves, and what it costs.

It reuses the domain model (``tuner.model``), the analysis (``tuner.analyse``) and the planner
(``tuner.plan``) unchanged, and simulates around them: load patterns (``load``), workloads with
published requests, HPAs and PodDisruptionBudgets (``workloads``), node types with real prices
(``prices``) in node pools (``pools``), kube-scheduler's default scoring (``scheduler``), the HPA
(``hpa``), the Cluster Autoscaler (``autoscaler``) and its expanders (``expander``), Karpenter
(``karpenter``, ``karpenter_packing``, ``karpenter_disruption``), the cluster state and its
``Cluster`` view (``state``), the tick loop (``engine``) and its parts: the clock (``clock``),
the controllers (``controllers``), window tracking (``window_tracking``), metrics recording
(``recorder``), the executor's port (``controls``), the strategy protocol (``strategy``); the
simulated executor (``executor``), what is recorded (``metrics``), the
daemon cycle's ports over a simulation (``ports``), the strategies run next to the autoscalers
(``strategies``: CA alone, the 2019 tuner, this tuner through the daemon's own cycle),
scenarios (``scenarios``; scenario files: ``scenario_file``, ``scenario_schema``,
``scenario_rules``, ``scenario.schema.json``), the
comparison, the lower bound, tables and plots (``report``, ``bound``, ``plots``, ``evaluate``;
``tuner simulate``) and the moderator in accelerated time (``demo``;
``tuner demo``).

Driving a simulation from outside (e.g. the daemon's moderator loop for a demo)
--------------------------------------------------------------------------------

::

    from tuner.sim.engine import Simulation
    from tuner.sim.scenarios import scenario

    sim = Simulation(scenario("online-boutique", hours=2), seed=1)  # no strategy: you drive
    sim.advance(sim.scenario.warmup)          # (b) advance simulated time, in seconds
    cluster = sim.cluster()                   # (a) the Cluster value now (tuner.model.cluster)
    window = sim.window(600)                  # (c) the last 600 s: window.stable, window.load,
                                              #     window.start, window.end (simulated seconds)
    if window.stable:
        actions = plan(cluster, analyse(cluster, settings, history, rng, timers, sim.now).change)
        results = sim.apply(actions, node_removal="autoscaler")   # (d) through the executor
        for r in results:                     # one ActionResult per executed action:
            print(r.action, r.verified, r.detail)   # verified: Ready off its source

- ``Simulation.cluster() -> Cluster``: registered, ready nodes and every pod (pending pods have
  ``node=None``), with the scenario's HPAs; the same value a dump or the live source gives.
- ``Simulation.advance(seconds)``: runs HPAs, ReplicaSets, the scheduler and the Cluster
  Autoscaler tick by tick (5 s). ``Simulation.now`` is the simulated time in seconds (0 = end of
  the warm-up); a strategy passed to the constructor is called every tick (``on_tick``).
- ``Simulation.window(seconds) -> WindowSummary``: ``stable`` is true when the node set and every
  workload's pod count did not change over the window and no pod is pending; ``load`` is the
  mean load served over the window (at most ``window_tracking.MAX_WINDOW`` seconds back).
- ``Simulation.apply(actions, node_removal) -> tuple[ActionResult, ...]``: carries out
  ``Migrate``/``Add``/``Remove``/``RemoveNode`` (``tuner.plan.actions``) in order as the real
  executor does (the nodes the plan empties cordoned before its first move; label the target,
  evict (a one-replica Deployment's pod: surge its rollout, ``surge_lone_pods``) or scale, let
  the scheduler place the pod with its weight-100 preferred affinity, verify it is Ready off its
  source and off those nodes, unlabel: ``ActionResult.elsewhere`` when it landed off its
  target); the first unverified action stops the transition and later actions
  are not run (nor returned). ``node_removal`` is the setting
  ``execute.node_removal``: ``autoscaler`` (cordon, the Cluster Autoscaler deletes the empty
  node after its unneeded time), ``command`` (the VM goes now) or ``delete-node`` (the Node
  object goes, the VM keeps running and registers again, as the 2019 thesis saw).

Everything random draws from one ``random.Random(seed)``: the same seed gives the same run.
"""
