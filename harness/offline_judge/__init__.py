"""``harness judge``: judge recorded episodes after the fact, with any registered judge.

The package's rooms: :mod:`.targets` (what to judge, its episodes read and packed), :mod:`.sets`
(judgement sets on disk), :mod:`.episodes` (one episode through a worker's judges), :mod:`.passes`
(the pass over many runs, its worker pool and report), :mod:`.heap` (the C heap of a pass: malloc
arenas, free pages given back); the command line is :mod:`harness.cli.judge`.

The judges are the same :class:`~harness.core.episode.StepObserver` objects the live runner feeds; here
the step stream comes from disk instead of a phone. For every complete episode of every run folder
given (``results.jsonl`` has its line), a set of judges (built from the registry; see
``fresh_judges`` below) gets ``start`` with the episode's task, one ``on_step`` per recorded step
(screens read from disk one step at a time, with the checks of
:func:`harness.records.resolve_screen`) and ``finish``; the verdicts go to

    RUN/judgements/<judge-set-id>/results.jsonl    one line per episode, appended crash-safely
    RUN/judgements/<judge-set-id>/manifest.json    judge specs, command, passes with their cost

The original ``RUN/results.jsonl`` is never rewritten. A pass is resumable: episodes that already
have a line are skipped (``--retry-errors`` judges again those with a ``judge_error``). Two
processes cannot write one judgement set (a lock is held).

Failure behaviour: a judge that raises, or whose model fails after the client's retries, gives
``judge_error`` with the reason for that episode; the pass goes on. Episodes that ended in
``infra_error`` are not judged (the live runner does not judge them either) and are counted.

Concurrency: ``concurrency`` K is the most model calls in flight at once. It is enforced by the
model client's per-endpoint semaphore (the judges' ``ModelConfig.concurrency`` is set to K); several
episodes are judged at once (``episodes_in_flight``, 2K by default) so that judges that call the
model one step after another still keep K calls busy. Each worker thread keeps its judge objects and
``start``s them again for its next episode (``fresh_judges`` builds new ones every episode instead).

Cost accounting: each episode's judges get a :class:`harness.core.usage.Meter` of its own in their
:class:`~harness.core.episode.EpisodeContext` (reporting into the pass's meter), and pass it to every
model call they make, as they do in a live run: every call (calls, failures, prompt and completion
tokens, model seconds) counts for its episode and for the pass, whichever thread makes it.
"""

from __future__ import annotations

from harness.offline_judge.episodes import JudgeSlot, judge_episode, line_usage, png_size
from harness.offline_judge.errors import OfflineJudgeError
from harness.offline_judge.passes import JudgeSetup, OfflineReport, judge_runs, prepare_judges
from harness.offline_judge.sets import JudgementSet, check_set_id, default_set_id, spec_key
from harness.offline_judge.targets import EpisodesRead, Target, minimal_task, read_episodes, resolve_targets

__all__ = ["EpisodesRead", "JudgeSetup", "JudgeSlot", "JudgementSet", "OfflineJudgeError", "OfflineReport", "Target",
           "check_set_id", "default_set_id", "judge_episode", "judge_runs", "line_usage", "minimal_task", "png_size",
           "prepare_judges", "read_episodes", "resolve_targets", "spec_key"]
