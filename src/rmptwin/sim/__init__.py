"""Deterministic discrete-event simulator: the same cores as the runtime, a seeded network."""
