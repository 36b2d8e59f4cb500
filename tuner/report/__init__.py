"""What a cycle or ``tuner plan`` reports: the plan report (analysis, actions, checks)
and its text form."""
