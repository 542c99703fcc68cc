"""The record schemas: an episode's result line, a step's line, a monitor's halt, with the
validation every reader applies."""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Any, Literal, TypeVar, Union
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, StrictBool, StrictInt, StrictStr

from harness.records.errors import RecordError
from harness.records.layout import check_relative_path, validate_task_id


RECORDS_VERSION = 1


# needs_user: the agent handed the phone to a person (UI-TARS call_user()) and nobody took it, or
# nobody handed it back in time: neither a failure of the agent's nor a success (docs/records.md)
# model_error: the agent's model endpoint failed a call for good (after its retries: down, refusing,
# timing out), so the episode ended there: the endpoint's failure, not a decision of the agent's
STATUSES = ("finished", "halted", "step_limit", "agent_error", "model_error", "infra_error", "task_error",
            "needs_user")
# left out of every rate: the infrastructure failed, the task could not start on that device (an
# app its setup names is not installed), or the agent's model could not be reached: none says
# anything about the agent
UNSCORED_STATUSES = ("infra_error", "task_error", "model_error")


Status = Literal["finished", "halted", "step_limit", "agent_error", "model_error", "infra_error", "task_error",
                 "needs_user"]


def now_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds, e.g. ``2026-05-09T07:35:25.123+00:00``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _check_iso(value: str) -> str:
    try:
        _dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"must be an ISO 8601 timestamp such as 2026-05-09T07:35:25+00:00, got {value!r}") from None
    return value


def _check_task_id_value(value: str) -> str:
    try:
        return validate_task_id(value)
    except RecordError as e:
        raise ValueError(e.message) from None


def _check_verdict(value: Any) -> bool | str:
    if value is True or value is False or (isinstance(value, str) and value == "judge_error"):
        return value
    raise ValueError(f'must be true, false or "judge_error", got {value!r}')


def _check_rel(value: str) -> str:
    return check_relative_path(value)


TaskId = Annotated[StrictStr, AfterValidator(_check_task_id_value)]


IsoTime = Annotated[StrictStr, AfterValidator(_check_iso)]


Verdict = Annotated[Union[bool, str], PlainValidator(_check_verdict)]


RelPath = Annotated[StrictStr, AfterValidator(_check_rel)]


FiniteFloat = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class Halt(BaseModel):
    """Why a monitor stopped the episode.  Extra keys are allowed and kept."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    step: Annotated[int, Field(ge=0, strict=True)]
    category: StrictStr
    reason: StrictStr
    monitor: StrictStr | None = None


class EpisodeResult(BaseModel):
    """One line of ``results.jsonl`` (and the body of ``episode.json``).

    ``steps`` counts the steps whose action ran; ``proposed_steps`` (when given) every step
    recorded, a halted or refused proposal included. Extra fields are allowed and preserved on
    write and read.
    """

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_id: TaskId
    agent: Annotated[StrictStr, Field(min_length=1)]
    status: Status
    steps: Annotated[int, Field(ge=0, strict=True)]
    cap: Annotated[int, Field(ge=1, strict=True)]
    proposed_steps: Annotated[int, Field(ge=0, strict=True)] | None = None
    verdicts: dict[str, Verdict]
    device: StrictStr | None = None
    attempt: Annotated[int, Field(ge=1, strict=True)] = 1
    started_at: IsoTime | None = None
    ended_at: IsoTime | None = None
    duration_s: Annotated[FiniteFloat, Field(ge=0)] | None = None
    error: StrictStr | None = None
    halt: Halt | None = None
    judge_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    seed: StrictInt | StrictStr | None = None


class StepRecord(BaseModel):
    """One line of ``trajectory.jsonl``.  Unknown fields are refused: put them in ``extras``.

    ``executed`` says whether the proposed action reached the phone; records written before the
    field existed leave it out, and :attr:`ran` then tells it from the rest of the line."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    index: Annotated[int, Field(ge=1, strict=True)]
    action: dict[str, Any] | None = None
    executed: StrictBool | None = None
    invalid: StrictStr | None = None
    raw_output: StrictStr | None = None
    thought: StrictStr | None = None
    screen_before: RelPath
    screen_after: RelPath | None = None
    timings: dict[str, FiniteFloat] = Field(default_factory=dict)
    monitor: dict[str, Any] | None = None
    # who acted: left out for the agent; "operator" for a person's touch during a hand-over (its
    # action read from the touchscreen, never proposed by the agent nor checked by a monitor)
    by: Literal["agent", "operator"] | None = None
    # the agent's needs_user step: what became of it (outcome handed_back / timeout / nobody /
    # gave_up, the question, asked_at, answered_at, wait_s, the operator steps' indexes)
    handover: dict[str, Any] | None = None
    # --monitor-mode reflect: the flagged proposal was not run and the agent was told why (``feedback``:
    # exactly the text added to its conversation; the verdict's monitor, category, reason, in_row, limit)
    reflection: dict[str, Any] | None = None
    extras: dict[str, Any] | None = None

    @property
    def by_operator(self) -> bool:
        return self.by == "operator"

    @property
    def ran(self) -> bool:
        """Whether the action ran: the recorded ``executed``, else (older records) an action that
        was valid, not refused by the device and not stopped by a monitor's halt."""
        if self.executed is not None:
            return self.executed
        return self.action is not None and self.invalid is None and not (self.monitor or {}).get("halt")


# A step's thought is a part of its raw output (the reply it was read from); a longer one is kept
# as its first THOUGHT_CHARS characters, the whole being in raw_output, so a reply is stored once
# (a 50 MB reply was stored twice, as raw_output and as thought: issue 28)
THOUGHT_CHARS = 4000


def kept_thought(thought: str | None, raw_output: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """The thought a step record keeps, and the note a cut one gets in the step's ``extras``
    (``thought_cut``: ``{"chars": its length, "kept": THOUGHT_CHARS, "whole_in": "raw_output"}``,
    ``whole_in`` None when the thought is not a part of the raw output as it is)."""
    if thought is None or len(thought) <= THOUGHT_CHARS:
        return thought, None
    whole_in = "raw_output" if raw_output and thought in raw_output else None
    return thought[:THOUGHT_CHARS], {"chars": len(thought), "kept": THOUGHT_CHARS, "whole_in": whole_in}


M = TypeVar("M", bound=BaseModel)
