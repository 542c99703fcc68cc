"""The data every layer shares: actions, tasks and their state checks, the episode protocols
(agents, monitors, judges, operators), screen hierarchies and screenshots, verdict and usage
records, the plugin registry, and the small formats two sides share (profile folders, input codes,
local ports). Nothing here imports another package of the harness but :mod:`harness.records`."""
