"""Running the tuner as a daemon: metrics and health, logs, leader election, `tuner run`."""
