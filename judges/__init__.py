"""Judges: one module per judge. Importing this package registers them in harness.registry.JUDGES."""

from judges import oracle  # noqa: F401  (registration side effects)
