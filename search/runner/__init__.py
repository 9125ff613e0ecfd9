"""The runner: trains trials on Ray workers for a study and never decides what to search.

context (what a command resolved once about its study, handed to everything here), driver (ask/tell and the
worker pool), worker (one trial, as a Ray actor or in process), cache (duplicate schedules), undelivered (results
kept through a database outage), cluster (checks before joining one, and joining it), preflight (the corpus and
the machine checked before anything is stored), checkpoints (which trained models to keep), messages (what a
worker tells the driver), progress (the protocol the driver reports into). Import the submodules: this package
itself imports nothing, so reading a constant here does not load Ray or torch.
"""
