"""The run record: written while a run happens, crash-safe, readable with validation.

Layout of a run folder ``RUN/`` (see ``docs/records.md`` for the full description)::

    RUN/manifest.json                        atomic rewrite, always redacted
    RUN/results.jsonl                        one line per finished episode (the commit point)
    RUN/episodes/<task-id>/trajectory.jsonl  one line per step, appended as it happens
    RUN/episodes/<task-id>/screens/NNN.png   000.png = initial screen, NNN.png = after step NNN
    RUN/episodes/<task-id>/episode.json      optional summary, atomic
    RUN/.lock                                advisory lock held by the writing process

Writers never hold a run in memory: every step, screen and result goes to disk when it
is produced.  Appends are one ``os.write`` of one complete line; whole-file writes go to
a temporary file in the same folder, then are ``os.replace``d over the target.  Durability
(``fsync``) is where resume needs it: the manifest, ``results.jsonl`` (the commit point of
an episode) and, just before that line, the episode's own files.  Step lines and screens
are not fsynced as they are written (an unfinished episode is redone whole on resume), so a
step never waits on the disk.  Readers validate every line and raise :class:`RecordError`
naming ``file:line: field: problem``.

The package's rooms: :mod:`.errors`, :mod:`.json_text` (JSON encoding), :mod:`.files` (atomic
file I/O), :mod:`.layout` (where records live, path safety), :mod:`.schema` (the record
schemas), :mod:`.readers`, :mod:`.writers`, :mod:`.redaction`, :mod:`.environment`. Import
from ``harness.records``: these names are its public face. It depends only on the standard
library, pydantic and the one secret rule (:mod:`harness.core.secret_text`, standard library only).
"""


from __future__ import annotations

from harness.records.environment import build_environment_info, git_info
from harness.records.errors import RecordError
from harness.records.files import atomic_write_bytes, atomic_write_json, file_sha256
from harness.records.json_text import RecordJSONEncoder, dumps, to_jsonable
from harness.records.layout import (EPISODES_DIR, INCOMING_PREFIX, LOCK_FILE, MANIFEST_FILE, RESULTS_FILE,
                                    SCREENS_DIR, SUMMARY_FILE, TRAJECTORY_FILE, check_inside, check_relative_path,
                                    distinct_runs, episode_dir, own_file, resolve_screen, screen_name,
                                    validate_task_id)
from harness.records.readers import (ResultList, StepStream, iter_steps, list_episodes, read_manifest, read_results,
                                     read_summary)
from harness.records.redaction import REDACTED, is_secret_key, redact
from harness.records.schema import (THOUGHT_CHARS, EpisodeResult, Halt, RECORDS_VERSION, STATUSES, Status, StepRecord,
                                    UNSCORED_STATUSES, kept_thought, now_iso)
from harness.records.writers import EpisodeWriter, RunWriter

__all__ = [
    "RECORDS_VERSION",
    "REDACTED",
    "STATUSES",
    "UNSCORED_STATUSES",
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "EPISODES_DIR",
    "TRAJECTORY_FILE",
    "SCREENS_DIR",
    "SUMMARY_FILE",
    "LOCK_FILE",
    "INCOMING_PREFIX",
    "RecordError",
    "Status",
    "Halt",
    "EpisodeResult",
    "THOUGHT_CHARS",
    "kept_thought",
    "StepRecord",
    "RunWriter",
    "EpisodeWriter",
    "ResultList",
    "StepStream",
    "read_manifest",
    "read_results",
    "read_summary",
    "iter_steps",
    "list_episodes",
    "episode_dir",
    "distinct_runs",
    "check_inside",
    "own_file",
    "resolve_screen",
    "screen_name",
    "validate_task_id",
    "check_relative_path",
    "build_environment_info",
    "git_info",
    "file_sha256",
    "redact",
    "is_secret_key",
    "to_jsonable",
    "dumps",
    "RecordJSONEncoder",
    "atomic_write_bytes",
    "atomic_write_json",
    "now_iso",
]
