"""What a model call is set up with (:class:`ModelConfig`), what it gives back
(:class:`ChatResult`) and what it raises when it fails for good (:class:`ModelError`), with the
reply size limits every call keeps."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

StructuredMode = Literal["auto", "json_schema", "guided", "none"]


class ModelError(RuntimeError):
    """A model call that failed for good (after retries), with the reason."""

    def __init__(self, message: str, *, kind: str = "error", status: int | None = None, attempts: int = 0):
        super().__init__(message)
        self.kind, self.status, self.attempts = kind, status, attempts


# A reply body longer than this is cut (ModelConfig.max_reply_bytes; --model-max-reply-bytes,
# --judge-max-reply-bytes): 2 MiB is ~500k tokens of text, hundreds of times a reply at any
# max_tokens a run uses, yet a 50 MB reply of a model that loops is stopped at 2 MiB
MAX_REPLY_BYTES = 2 * 1024 * 1024
MIN_REPLY_BYTES = 1024  # below this even a short verdict's envelope would not fit
# what a call's attempt may read from the network besides its body: headers, chunk framing (a
# body trickled one byte per chunk carries ~6 bytes of framing a byte), an error reply's body
WIRE_BYTES_PER_BODY_BYTE = 8


@dataclass(frozen=True)
class ModelConfig:
    base_url: str
    model: str
    api_key_env: str | None = None         # None: the provider's own variable for its own hosts only (key_for)
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 1024
    seed: int | None = None
    timeout_s: float = 120.0               # one attempt, whole: connect, headers and body together
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    max_wait_s: float = 300.0              # longest Retry-After honoured; a longer one is a ModelError
    concurrency: int = 8
    structured: StructuredMode = "auto"
    extra_body: dict[str, Any] = field(default_factory=dict)
    deadline_s: float | None = None        # the whole call, retries and waits included; None: no bound but theirs
    max_reply_bytes: int = MAX_REPLY_BYTES  # a longer reply body is cut there (truncated_by: max_reply_bytes)

    def __post_init__(self) -> None:
        for name in ("timeout_s", "deadline_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and 0 < v < float("inf")):
                raise ValueError(f"{self.base_url}: {name} must be a number of seconds > 0, not {v!r}")
        if not (isinstance(self.max_reply_bytes, int) and self.max_reply_bytes >= MIN_REPLY_BYTES):
            raise ValueError(f"{self.base_url}: max_reply_bytes must be at least {MIN_REPLY_BYTES}, "
                             f"not {self.max_reply_bytes!r}")

    @property
    def longest_call_s(self) -> float:
        """The longest one call may take, retries and their waits included: ``deadline_s``, else
        every attempt's ``timeout_s`` plus the longest wait between two (``max_backoff_s``, or a
        Retry-After up to ``max_wait_s``)."""
        if self.deadline_s is not None:
            return self.deadline_s
        return (self.max_retries + 1) * self.timeout_s + self.max_retries * max(self.max_backoff_s, self.max_wait_s)

    def to_json(self) -> dict[str, Any]:
        """Everything that shapes a reply, for the manifest; the key's variable name, never the key."""
        return asdict(self)



@dataclass
class ChatResult:
    text: str
    usage: dict[str, int]
    latency_s: float
    attempts: int
    model: str
    structured: str                    # what the call used: json_schema, guided or none (plain text)
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments"}] (OpenAI tool_calls)
    cut_at: int | None = None          # the body passed this many bytes (max_reply_bytes) and was cut there
    system_fingerprint: str | None = None  # the server's backend configuration, where it says (OpenAI's field)

    @property
    def truncated(self) -> bool:
        """The reply was cut off, at max_tokens or at the byte limit: asking again unchanged would
        cut it off again."""
        return self.finish_reason == "length" or self.cut_at is not None

    @property
    def truncated_by(self) -> str | None:
        """What cut the reply: ``max_reply_bytes`` (the client, at its byte limit), ``max_tokens``
        (the server), or None."""
        return "max_reply_bytes" if self.cut_at is not None else "max_tokens" if self.finish_reason == "length" else None

    def to_json(self) -> dict[str, Any]:
        out = {"usage": self.usage, "latency_s": round(self.latency_s, 4), "attempts": self.attempts,
               "model": self.model, "structured": self.structured, "finish_reason": self.finish_reason}
        if self.truncated:
            out["truncated"] = True
            out["truncated_by"] = self.truncated_by
        if self.cut_at is not None:
            out["reply_limit_bytes"] = self.cut_at
        if self.tool_calls:
            out["tool_calls"] = len(self.tool_calls)
        return out
