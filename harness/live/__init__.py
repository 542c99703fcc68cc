"""Watching a run while it happens, and letting a person decide.

- :mod:`harness.live.records`: the files a running episode writes beside its trajectory (the step
  being decided, judges' step evidence as it lands, operators' decisions, the run's secret for
  the decision buttons). The run folder is the only interface between the runner and the view.
- :mod:`harness.live.operator`: ``--monitor-mode ask``: a flagged action waits for a person, who
  answers on the terminal or on the live page; the first answer wins, no answer denies.
- :mod:`harness.live.state`: what the live page shows, read from the run folder.
- :mod:`harness.live.server`: the live page's server (``harness run --watch``, ``harness view
  --live``), built on the viewer's server and its path and Host rules.
- :mod:`harness.live.page`: the page itself (HTML, CSS, JS; no markup from the records).
"""
