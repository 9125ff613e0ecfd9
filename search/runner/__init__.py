"""The runner: trains trials on Ray workers for a study and never decides what to search.

driver (ask/tell and the worker pool), worker (one trial, as a Ray actor or in process), cache (duplicate
schedules), undelivered (results kept through a database outage), cluster (checks before joining one),
checkpoints (which trained models to keep), corpus (checked once before training), single (`prism-search
train`). Import the submodules: this package itself imports nothing, so reading a constant here does not load
Ray or torch.
"""
