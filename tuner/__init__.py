"""Deployment tuner for Kubernetes: fewer, fuller nodes next to HPA and the Cluster Autoscaler."""

__version__ = "0.1.0"
