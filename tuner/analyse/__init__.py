"""Analyse: cost model, node removal, previous deployment, exploration and the decision."""
