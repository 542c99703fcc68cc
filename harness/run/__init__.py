"""Running episodes: the episode loop (:mod:`.runner`), a suite over many devices (:mod:`.suite`),
static runs over recorded steps (:mod:`.static_run`), the checks a suite passes before it runs
(:mod:`.task_checks`, :mod:`.task_trials`) and the run's plugin options (:mod:`.options`). The
runner talks to a Device and to plugins through harness.core's protocols only."""
