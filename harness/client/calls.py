"""One client for every model call, agents' and judges' alike: OpenAI-compatible chat completions
(vLLM, SGLang, OpenAI, DashScope) through the ``openai`` package.

- Keys go only where they belong (:func:`key_for`): the variable named by ``api_key_env`` when
  one is named, else ``OPENAI_API_KEY`` for api.openai.com and ``DASHSCOPE_API_KEY`` for DashScope's
  hosts only (over https); any other endpoint gets no Authorization header at all. A key is never
  stored in a config's spec, a record, a log line or an exception message.
- Screenshots are encoded once per step under an explicit, recorded :class:`ImagePolicy`.
- Calls to one endpoint share a bounded number of slots (the largest ``concurrency`` any client of
  it asks for) across threads, served in priority order: a gate check before an agent call before
  live step evidence before offline judging; the background classes leave a reserve of slots free
  for the first two, so a gate check never queues behind evidence calls (:class:`Priority`).
- Each call reports its usage to the :class:`harness.core.usage.Meter` its caller passes in.
- Every attempt has a deadline for the whole of it, ``timeout_s``: connecting, waiting for the
  headers and reading the whole body together (not httpx's timer per read, which a server sending
  a byte every few seconds never trips; :mod:`harness.client.transport`). The call, retries and
  their waits included, ends by ``deadline_s`` when one is set (else attempts and waits bound it:
  :attr:`ModelConfig.longest_call_s`) and by any deadline its caller set for the thread (a monitor's ``timeout_s``:
  :func:`harness.client.transport.deadline`). Waiting for an endpoint slot counts too.
- A reply body over ``max_reply_bytes`` is cut there (its connection closed, never read to the
  end) and marked ``truncated`` (``truncated_by: max_reply_bytes``); a cut reply to a call that asked
  for a JSON schema (a verdict) is a :class:`ModelError` (kind ``too_large``), never read.
- 408, 429, 5xx, timeouts and refused connections are retried with exponential backoff, honouring
  ``Retry-After`` (seconds or an HTTP date) up to ``max_wait_s``; a longer wait is a
  :class:`ModelError` that says so. After the last try a :class:`ModelError` says what failed and why.
- :func:`stop_calls` (Ctrl-C) cuts every call in flight at once and fails every later one until
  :func:`allow_calls` (kind ``interrupted``): no thread stays in a model call after the run stops.
- A reply cut off at ``max_tokens`` (``finish_reason: length``) is marked ``truncated``; tool calls
  returned the OpenAI way (``message.tool_calls``) are kept beside the text.
- Servers that refuse a request for too many images or too long a context get an error naming the
  limit to raise (vLLM ``--limit-mm-per-prompt`` / ``--max-model-len``; FIELD_NOTES section 3).
- Structured output (JSON schema, or vLLM's ``guided_json``) where the server supports it: ``auto``
  asks for a JSON schema; a 400 that names response_format is remembered for that endpoint AND
  model, and the request is repeated in plain text. Each result says what was used
  (``ChatResult.structured``), and :func:`structured_report` what each endpoint and model used.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import fields, replace
from typing import Any, Iterator

from harness.client import transport
from harness.client.config import WIRE_BYTES_PER_BODY_BYTE, ChatResult, ModelConfig, ModelError
from harness.client.keys import key_for
from harness.client.slots import SLOTS_PER_POOL, NoSlot, Priority, endpoint_slots, wake_every_waiter
from harness.client.structured import count_mode, refuse_mode, refused_modes
from harness.core.secret_text import REDACTED, redact_text
from harness.core.usage import Meter

_stopped: list[str | None] = [None]  # why every call fails now (stop_calls), or None


def stop_calls(reason: str = "the run is stopping (Ctrl-C or SIGTERM)") -> None:
    """Cut every model call in flight (its socket shut: a thread blocked reading wakes at once),
    wake every call waiting for a slot, and fail every later call, each with a :class:`ModelError`
    of kind ``interrupted``, until :func:`allow_calls`. For Ctrl-C: no thread stays in a model call."""
    _stopped[0] = reason
    wake_every_waiter()
    transport.cut_all(reason)


PAUSE_STEP_S = 0.5  # a wait between two attempts notices a stop (stop_calls) within this long


def _pause(seconds: float) -> None:
    """Wait ``seconds`` between two attempts of a call, in steps of at most PAUSE_STEP_S, ending
    early when the calls are stopped (a Retry-After of minutes must not outlast Ctrl-C)."""
    left = seconds
    while left > 0 and not _stopped[0]:
        step = min(left, PAUSE_STEP_S)
        time.sleep(step)
        left -= step


def allow_calls() -> None:
    """Let calls go out again after :func:`stop_calls`."""
    _stopped[0] = None
    transport.allow()


@contextmanager
def calls_stopped(reason: str = "the run is stopping (Ctrl-C or SIGTERM)") -> Iterator[None]:
    """:func:`stop_calls` for the block, :func:`allow_calls` after it."""
    stop_calls(reason)
    try:
        yield
    finally:
        allow_calls()


_LIMIT_HINTS = (
    (re.compile(r"limit_mm_per_prompt|at most \d+ image|too many images|image.*limit", re.I),
     "the server refused the number of images in one request: raise vLLM's --limit-mm-per-prompt "
     "(e.g. --limit-mm-per-prompt image=16) or the provider's image limit, or send fewer images"),
    (re.compile(r"maximum context length|context length|max_model_len|too long|token limit", re.I),
     "the request is longer than the model's context: raise vLLM's --max-model-len, lower the image "
     "size (--image-max-side), or shorten the history"),
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _key_forms(key: str | None) -> tuple[str, ...]:
    """The key as text may hold it: as it is, and with ``/`` escaped the way JSON may write it."""
    if not key or len(key) < 4:  # a key this short would blank ordinary text; none is that short
        return ()
    return (key, key.replace("/", "\\/")) if "/" in key else (key,)


def _without_key(value: Any, key: str | None) -> Any:
    """``value`` with the client's own key replaced in every string in it (a server that echoes the
    caller's credential in a reply or an error). It relies on knowing the key, whatever its shape."""
    if isinstance(value, str):
        for form in _key_forms(key):
            value = value.replace(form, REDACTED)
        return value
    if isinstance(value, list):
        return [_without_key(v, key) for v in value]
    if isinstance(value, dict):
        return {k: _without_key(v, key) for k, v in value.items()}
    return value


def _scrub(text: str, key: str | None) -> str:  # the own key, then the one rule (harness.core.secret_text)
    return redact_text(_without_key(text, key))


def _reply_without_key(res: "ChatResult", key: str | None) -> "ChatResult":
    """``res`` with ``key`` taken out of every text it holds (all its fields, whatever they are)."""
    if not _key_forms(key):
        return res
    return replace(res, **{f.name: _without_key(getattr(res, f.name), key) for f in fields(res)})


class ModelClient:
    """Thread-safe, synchronous chat completions against one endpoint and model."""

    def __init__(self, config: ModelConfig):
        import httpx2
        import openai

        self.config = config
        self._auth = key_for(config)
        self._key = self._auth.key
        self._openai = openai
        self._httpx = httpx2
        self._pools: list[Any] = [self._new_pool()]
        self._pools_lock = threading.Lock()
        self._rng = random.Random(0)

    def _new_pool(self) -> Any:
        # the SDK needs some api_key even when none is sent: without a key every request omits the
        # Authorization header (_request), so the placeholder never leaves this process. Its HTTP
        # client connects through harness.client.transport, which keeps each attempt's deadline.
        return self._openai.OpenAI(base_url=self.config.base_url, api_key=self._key or "no-key-sent",
                                   timeout=self.config.timeout_s, max_retries=0, http_client=transport.http_client())

    def _pool(self, slot: int) -> Any:
        """The SDK client (and so the connection pool) of endpoint slot ``slot``: one per
        ``SLOTS_PER_POOL`` slots, made when first needed. The HTTP library looks through every
        connection of its pool on each request and each response (which are idle, which expired),
        under the pool's lock, so one pool for 64 calls in flight spent ~2 x 80 connection checks per
        call; pools of 8 keep that small whatever the concurrency."""
        i = slot // SLOTS_PER_POOL
        pools = self._pools
        if i < len(pools):
            return pools[i]
        with self._pools_lock:
            while len(self._pools) <= i:
                self._pools.append(self._new_pool())
            return self._pools[i]

    def spec(self) -> dict[str, Any]:
        return self.config.to_json()

    def _request(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, mode: str,
                 slot: int = 0) -> Any:
        """POST /chat/completions through the SDK's client (its auth, retries off, timeouts and
        errors) with the body as we build it; returns the response with its headers read and its
        body not (``stream=True``, ``cast_to=httpx2.Response``), for :meth:`_chat` to read under
        its byte limit. ``chat.completions.create`` would first walk every message part against
        the SDK's parameter types (``maybe_transform``): ~40 % of a judging pass's CPU per call,
        for a body it leaves as it is (chat messages have no aliased or specially formatted
        fields); and it reads the whole body, however long. ``client.post`` is the SDK's
        documented way to send a body of one's own (openai README, "Undocumented endpoints");
        ``create`` sends the same JSON."""
        c = self.config
        body: dict[str, Any] = {"model": c.model, "messages": messages, "temperature": c.temperature,
                                "max_tokens": c.max_tokens}
        if c.top_p is not None:
            body["top_p"] = c.top_p
        if c.seed is not None:
            body["seed"] = c.seed
        if schema is not None and mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": schema.get("title", "reply"), "schema": schema}}
        extra = dict(c.extra_body)
        if schema is not None and mode == "guided":
            extra["guided_json"] = schema
        options: dict[str, Any] = {"security": {"bearer_auth": True}}
        if extra:
            options["extra_json"] = extra
        if self._key is None:
            options["headers"] = {"Authorization": self._openai.Omit()}
        return self._pool(slot).post("/chat/completions", body=body, options=options, cast_to=self._httpx.Response,
                                     stream=True)

    def served_models(self, timeout: float) -> list[str] | None:
        """``GET /models`` as this client calls the endpoint (its key rule, transport and proxies),
        within ``timeout`` seconds: the model ids listed, or None when the answer lists none
        readable (any HTTP answer but 401/403 shows something is there). A :class:`ModelError`
        when nothing answers (kind ``unreachable``) or the endpoint refuses the key (``refused``)."""
        options: dict[str, Any] = {"security": {"bearer_auth": True}}
        if self._key is None:
            options["headers"] = {"Authorization": self._openai.Omit()}
        try:
            with transport.attempt(time.monotonic() + timeout, 1024 * 1024):
                resp = self._pool(0).get("/models", options=options, cast_to=self._httpx.Response, stream=True)
                body, _ = transport.read_body(resp, 1024 * 1024)
        except self._openai.APIStatusError as e:
            if e.status_code in (401, 403):
                raise self._fail(f"GET /models: HTTP {e.status_code}: "
                                 f"{_scrub(str(getattr(e, 'message', e)), self._key)[:200]}", "refused", 1,
                                 e.status_code) from None
            return None
        except (self._openai.APIConnectionError, self._httpx.RequestError) as e:
            cause = e.__cause__ or e.__context__
            why = _scrub(f"{e}" + (f" ({cause})" if cause is not None and str(cause) not in str(e) else ""), self._key)
            raise self._fail(f"GET /models: nothing answers: {why[:200]}", "unreachable", 1) from None
        try:
            data = json.loads(body)
            return [str(m["id"]) for m in data.get("data") or [] if isinstance(m, dict) and "id" in m]
        except (ValueError, TypeError, AttributeError, KeyError):
            return None

    def chat(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None,
             priority: int = Priority.LIVE, meter: Meter | None = None, role: str = "model") -> ChatResult:
        """One chat completion, retried as the config says. ``priority`` orders it among the calls
        waiting for this endpoint; its usage (also a failed call's) goes to ``meter`` as ``role``."""
        if meter is not None:
            meter.enter()
        try:
            # what leaves the client never holds its own key: a server may echo the caller's
            # credential in a reply, a model name, an error body or a header quoted in an error
            res = _reply_without_key(self._chat(messages, json_schema, priority), self._key)
        except ModelError as e:
            # a call cut because the command is stopping (Ctrl-C, SIGTERM) did not fail: it is not
            # counted (its episode is judged or run again on the next pass / --resume)
            if meter is not None and e.kind != "interrupted":
                meter.record(role, None, failed=True)
            e.args = tuple(_scrub(a, self._key) if isinstance(a, str) else a for a in e.args)
            raise
        finally:
            if meter is not None:
                meter.leave()
        if meter is not None:
            meter.record(role, res.usage, res.latency_s, structured=res.structured if json_schema is not None else None,
                         fingerprint=res.system_fingerprint)
        return res

    def _fail(self, what: str, kind: str, attempts: int, status: int | None = None) -> ModelError:
        c = self.config
        return ModelError(f"{c.model} at {c.base_url}: {what}", kind=kind, status=status, attempts=attempts)

    def _chat(self, messages: list[dict[str, Any]], json_schema: dict[str, Any] | None, priority: int) -> ChatResult:
        c = self.config
        key = (c.base_url, c.model)
        mode = c.structured if json_schema is not None else "none"
        if mode == "auto":
            mode = "none" if "json_schema" in refused_modes(key) else "json_schema"
        attempts = 0
        last: str = ""
        status: int | None = None
        start = time.monotonic()
        end = start + c.deadline_s if c.deadline_s is not None else float("inf")
        outer = transport.outer_deadline()
        caller_deadline = outer is not None and outer < end
        if caller_deadline:
            end = outer
        budget = f"{end - start:.3g}s " + ("(the caller's deadline for this call)" if caller_deadline else
                                           "(deadline_s; --model-deadline / --judge-deadline)")
        wire_bytes = c.max_reply_bytes * WIRE_BYTES_PER_BODY_BYTE + 64 * 1024
        while True:
            if _stopped[0]:
                raise self._fail(f"not sent: {_stopped[0]}", "interrupted", attempts)
            if time.monotonic() >= end:
                raise self._fail(f"no reply within the call's deadline of {budget} after {attempts} attempt(s); "
                                 f"last error: {last or 'none'}", "timeout", attempts, status)
            attempts += 1
            retry_after: float | None = None
            att: transport.Attempt | None = None
            shortened = False  # this attempt ends at the call's deadline, before its own timeout_s
            try:
                with endpoint_slots(c.base_url, c.concurrency).slot(priority, end if end < float("inf") else None) as slot:
                    until = time.monotonic() + c.timeout_s
                    shortened = until > end
                    with transport.attempt(min(until, end), wire_bytes) as att:
                        t0 = time.monotonic()
                        resp = self._request(messages, json_schema, mode, slot)
                        body, cut = transport.read_body(resp, c.max_reply_bytes)
                        latency = time.monotonic() - t0
                return self._result(body, cut, latency, attempts, mode, json_schema is not None)
            except NoSlot as e:
                if _stopped[0]:
                    raise self._fail(f"not sent: {_stopped[0]}", "interrupted", attempts) from None
                last = str(e)
                continue  # the deadline check above says so
            except self._openai.APIStatusError as e:
                status = e.status_code
                body_text = _scrub(str(getattr(e, "message", e)), self._key)
                last = f"HTTP {status}: {body_text[:300]}"
                if status == 400 and mode in ("json_schema", "guided") and c.structured == "auto" and \
                        re.search(r"response_format|json_schema|guided", body_text, re.I):
                    refuse_mode(key, mode, last)  # this server cannot do it for this model: ask in plain text
                    mode = "none"
                    attempts -= 1
                    continue
                for pattern, hint in _LIMIT_HINTS:
                    if status in (400, 413, 422) and pattern.search(body_text):
                        raise self._fail(f"{hint} ({last})", "limit", attempts, status) from None
                if status == 401 and self._key is None:
                    raise self._fail(f"the endpoint wants an API key and none was sent ({self._auth.reason}); name the "
                                     f"variable that holds this endpoint's key with --model-api-key-env VAR (judges: "
                                     f"--judge-api-key-env VAR) ({last})", "refused", attempts, status) from None
                if status not in RETRIED_STATUS and status < 500:
                    raise self._fail(f"request refused, {last}", "refused", attempts, status) from None
                ra = e.response.headers.get("retry-after") if getattr(e, "response", None) is not None else None
                retry_after = retry_after_s(ra)
                if retry_after is not None and retry_after > c.max_wait_s:
                    raise self._fail(f"the server asks to wait {retry_after:.0f}s before retrying (Retry-After: {ra}), "
                                     f"longer than the {c.max_wait_s:g}s this client waits (max_wait_s; --model-max-wait "
                                     f"/ --judge-max-wait) ({last})", "rate_limited", attempts, status) from None
            except (self._openai.APITimeoutError, self._httpx.TimeoutException):
                last = (f"timed out: no whole reply before the call's deadline of {budget}" if shortened else
                        f"timed out after {c.timeout_s:g}s: no whole reply (connect, headers and body together) in time")
            except (self._openai.APIConnectionError, self._httpx.RequestError) as e:
                if (att is not None and att.cut is not None) or _stopped[0]:
                    raise self._fail(f"stopped mid-call: {_stopped[0] or att.cut}", "interrupted", attempts) from None
                if att is not None and att.over:
                    raise self._fail(f"the reply passed {wire_bytes} bytes on the wire (max_reply_bytes "
                                     f"{c.max_reply_bytes} with its framing): not read further", "too_large",
                                     attempts, status) from None
                last = f"connection failed: {_scrub(str(e), self._key)[:200]}"
            if _stopped[0]:
                raise self._fail(f"stopped mid-call: {_stopped[0]}", "interrupted", attempts)
            if attempts > c.max_retries:
                raise self._fail(f"failed after {attempts} attempt(s) in {time.monotonic() - start:.1f}s; last error: "
                                 f"{last}", "exhausted", attempts, status)
            # the server's Retry-After as asked (already bounded by max_wait_s), else jittered backoff;
            # a wait that would end past the call's deadline is not waited
            delay = retry_after if retry_after is not None else min(
                c.max_backoff_s, c.backoff_s * (2 ** (attempts - 1)) * (0.5 + self._rng.random()))
            if time.monotonic() + delay >= end:
                raise self._fail(f"no time left to retry within the call's deadline of {budget} after {attempts} "
                                 f"attempt(s) (the next try was due in {delay:.2g}s); last error: {last}", "timeout",
                                 attempts, status)
            _pause(delay)

    def _result(self, body: bytes, cut: bool, latency: float, attempts: int, mode: str, verdict: bool) -> ChatResult:
        """The :class:`ChatResult` of a reply body (``cut``: the first ``max_reply_bytes`` of a
        longer one)."""
        c = self.config
        if verdict:
            count_mode((c.base_url, c.model), mode)
        if cut:
            if verdict:  # a cut verdict may have lost what it said last: it is never read
                raise self._fail(f"the reply passed the {c.max_reply_bytes}-byte limit (max_reply_bytes; "
                                 "--model-max-reply-bytes / --judge-max-reply-bytes) and was cut there; a verdict is "
                                 "never read from a cut reply", "too_large", attempts)
            text = _LONE_SURROGATE.sub("\ufffd", transport.partial_content(body))
            return ChatResult(text, {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, latency, attempts,
                              c.model, mode, finish_reason=None, cut_at=c.max_reply_bytes)
        try:
            data = json.loads(body)
            choices = data.get("choices") or []
            choice = choices[0] if choices else {}
            message = choice.get("message") or {}
            text = _message_text(message.get("content"))
            # a JSON "\ud83d" escape (half an emoji cut by max_tokens) decodes to a lone surrogate,
            # which no str-typed action or record accepts: keep it as U+FFFD
            text = _LONE_SURROGATE.sub("\ufffd", text)
            u = data.get("usage") or {}
            usage = {k: u.get(k) if isinstance(u.get(k), int) else 0
                     for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
            finish = choice.get("finish_reason")
            model = data.get("model") if isinstance(data.get("model"), str) and data.get("model") else c.model
            tool_calls = _tool_calls(message.get("tool_calls"))
            fingerprint = data.get("system_fingerprint")
        except (AttributeError, IndexError, KeyError, TypeError, ValueError, RecursionError) as e:
            raise self._fail(f"malformed response: {type(e).__name__}: {_scrub(str(e), self._key)[:200]}",
                             "malformed", attempts) from None
        return ChatResult(text, usage, latency, attempts, model, mode,
                          finish_reason=finish if isinstance(finish, str) else None, tool_calls=tool_calls,
                          system_fingerprint=fingerprint[:200] if isinstance(fingerprint, str) and fingerprint
                          else None)


def _message_text(content: Any) -> str:
    """A message's text: a string, nothing, or a list of parts (``{"type": "text", "text": ...}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TypeError(f"message content is a {type(content).__name__}")


# 408 Request Timeout and 429 Too Many Requests are worth another try, as is every 5xx (RFC 9110
# section 15.5.9: a 408 means the server closed an idle connection; the client may repeat it)
RETRIED_STATUS = frozenset({408, 429})


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for: delay-seconds or an HTTP date (RFC 9110 section
    10.2.3); None when absent or unreadable. A date in the past is 0."""
    if value is None:
        return None
    v = value.strip()
    try:
        secs = float(v)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(v)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            when = when.replace(tzinfo=datetime.timezone.utc)
        secs = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, secs)
    if not 0 <= secs < float("inf"):
        return None  # "-5" or "nan" would make time.sleep raise ValueError
    return secs


def _tool_calls(calls: Any) -> list[dict[str, Any]]:
    """A reply's ``message.tool_calls`` (servers that parse tool calls out of the text: vLLM with a
    ``--tool-call-parser``, DashScope) as ``[{"name", "arguments"}]``, ``arguments`` as sent (a JSON
    string, sometimes an object)."""
    out = []
    for tc in calls if isinstance(calls, list) else []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            continue
        out.append({"name": fn.get("name"), "arguments": fn.get("arguments")})
    return out
