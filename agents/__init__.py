"""Agents: one module per family. Importing this package registers them all in harness.registry.AGENTS."""

from agents import random_agent, replay, script  # noqa: F401  (registration side effects)
