"""Plan: a desired change becomes an ordered list of feasible actions."""
