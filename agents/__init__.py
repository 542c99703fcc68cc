"""Agents: one module per family. Importing this package registers them all in harness.core.registry.AGENTS."""

from agents import random_agent, replay, script  # noqa: F401  (registration side effects)
from agents import autoglm, gui_owl, m3a, mai_ui, qwen, uitars, vlm  # noqa: F401  (model-driven agents, their parsers)
