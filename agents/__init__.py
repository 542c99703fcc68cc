"""Agents: one module per family. Importing this package registers them all in harness.core.registry.AGENTS."""

from agents import random_agent, replay, script  # noqa: F401  (registration side effects)
from agents import m3a, qwen, uitars, vlm  # noqa: F401  (model-driven agents and their output parsers)
