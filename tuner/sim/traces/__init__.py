"""Load traces shipped with the simulator (see :mod:`tuner.sim.load`)."""
