"""Named scenarios written in the scenario file format (see docs/scenarios.md)."""
