"""Does each model endpoint answer, as the run will call it? ``GET /models`` first (is anything
there, and does it serve the model asked for), then one tiny chat request made exactly as the
run's calls are made: the same client, the same API key rule (harness.client.keys), the same model
name and, for judges and monitors, the same structured-output choice (a server that refuses
``response_format`` for this model is learned here, as the first verdict call would learn it). A
dead endpoint is one line naming its URL, the flag that set it and the error; nothing else is sent.

The request says what it is (:data:`PROBE_TEXT`), and asks for a few tokens only."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from harness.client.config import ModelConfig, ModelError
from harness.client.slots import Priority
from harness.preflight.problems import Problem

PROBE_TEXT = "crate-harness preflight: is this endpoint answering? Reply with the word ok."
PROBE_SCHEMA = {"title": "preflight", "type": "object", "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"], "additionalProperties": False}
PROBE_TIMEOUT_S = 20.0  # one attempt, whole; a model still loading its weights answers /models but not this
PROBE_MAX_TOKENS = 16


@dataclass(frozen=True)
class Endpoint:
    """A model endpoint a command will call: who calls it (``role``: "agent", "judges and
    monitors"), the flag that set it (named in a problem), its config, whether its calls ask for
    a JSON schema (``structured``: judges and monitors), and the priority its calls take."""

    role: str
    flag: str
    config: ModelConfig
    structured: bool = False
    priority: int = Priority.AGENT


def _first_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _reason(e: ModelError, cfg: ModelConfig) -> str:
    """The client's error without its ``MODEL at URL:`` prefix (the problem names both already)."""
    return _first_line(str(e).removeprefix(f"{cfg.model} at {cfg.base_url}: "))


def check_endpoint(ep: Endpoint) -> tuple[Problem | None, str]:
    """(the problem, or None; what was found, for ``harness preflight`` to print)."""
    from harness.client.calls import ModelClient
    from harness.client.keys import key_for

    cfg = ep.config
    where = f"the {ep.role} model endpoint {cfg.base_url} ({ep.flag})"
    try:
        key = key_for(cfg).key
    except ValueError as e:
        return Problem("endpoint", f"{where}: {e}"), ""
    timeout = min(cfg.timeout_s, PROBE_TIMEOUT_S)
    t0 = time.monotonic()
    probe = dataclasses.replace(cfg, max_retries=0, timeout_s=timeout, deadline_s=None,
                                max_tokens=PROBE_MAX_TOKENS, seed=None)
    client = ModelClient(probe)
    try:
        models = client.served_models(timeout)
    except ModelError as e:
        return Problem("endpoint", f"{where} does not answer: {_reason(e, cfg)}; start the server, or fix "
                                   f"{ep.flag}"), ""
    try:
        res = client.chat([{"role": "user", "content": PROBE_TEXT}], json_schema=PROBE_SCHEMA if ep.structured else None,
                          priority=ep.priority)
    except ModelError as e:
        listed = ""
        if models and cfg.model not in models:
            listed = f"; it serves {', '.join(models[:5])}{' ...' if len(models) > 5 else ''}, not {cfg.model!r}"
        return Problem("endpoint", f"{where}: a one-line test request to model {cfg.model!r} failed: {_reason(e, cfg)}{listed}"), ""
    mode = f", structured output: {res.structured}" if ep.structured else ""
    key_var = key_for(cfg).variable
    return None, (f"{where} answers: model {cfg.model}, {(time.monotonic() - t0) * 1000:.0f} ms{mode}, "
                  + (f"key from ${key_var}" if key_var else "no API key sent"))
