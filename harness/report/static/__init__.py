"""Static scorers: one profile per published scorer (a module each, with its source and commit).
The cross-scorer table is the report's (:mod:`harness.report.static_table`), not the scorers'."""
