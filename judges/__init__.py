"""Judges: one module per judge. Importing this package registers them in harness.core.registry.JUDGES
(and the crate-s monitor in harness.core.registry.MONITORS)."""

from judges import oracle  # noqa: F401  (registration side effects)
from judges import crate, holistic, milestones, monitor  # noqa: F401  (registration side effects)
