"""Serving simulation: requests arrive, a scheduler batches them, the calculator costs each
step. `simulate` runs one policy on one workload; `metrics.Summary` reports it."""
