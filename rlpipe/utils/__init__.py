"""Shared utilities: batches, checkpoints, metrics, seeding."""
