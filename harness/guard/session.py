"""One guarded session: every device service a client asks for is read, gated and recorded.

A service whose commands only read passes through untouched and unmetered. A command that acts on
the phone becomes one step per action: the screen before it is taken over the guard's own
connection, the monitors check it through :mod:`harness.run.gate` (the runner's code: fail closed,
``gate``/``ask``/``async``, a calibration file, the operator), and a blocked action is never
relayed. In a shell line the blocked command is replaced by one that prints the reason on standard
error and fails (``sh -c 'echo REASON >&2; exit 1'``), so the rest of the line runs and the
client's own exit-status idiom (shell v2's exit packet, adbutils' ``; echo X4EXIT:$?``) reads the
refusal; a line with nothing left to run is answered by the guard itself. A command the guard
cannot read is refused unless ``allow_opaque`` (then relayed and recorded as unguarded); a channel
it cannot see into (a port forward, an on-device server, an interactive shell) is warned about on
the terminal and in the records, and refused with ``strict``.

Async checks run beside the relayed action; the next action waits for them, and one that flagged an
action after it ran halts the session: every action after it is refused, as the runner halts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.core.actions import Action, DeviceCommand, action_to_json
from harness.core.episode import LiveRecorder, Monitor, MonitorVerdict, Operator, ProposedStep, Question, StepEvent
from harness.run.gate import Checks, Flagged, Interrupted
from harness.guard import clients
from harness.guard.commands import Reading, device_command, read_command, read_service
from harness.guard.relay import ServiceCall
from harness.guard.shell_words import Simple, Word, quote, split
from harness.guard.steps import Steps
from harness.records import EpisodeWriter, StepRecord, now_iso

log = logging.getLogger("harness.guard")

EXIT_IDIOM = re.compile(r"^(.*?)\s*;\s*echo X4EXIT:\$\?\s*$", re.S)  # adbutils' shell2 over shell v1
MAX_COMMAND = 8000
MAX_SCREEN_BYTES = 64 << 20
AGENT_SHOT_S = 10.0  # an agent's screenshot older than this is not the screen before its action
PNG_SIGNATURE, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"   # of a command line kept in a step's record
REASON_CHARS = 300   # of a refusal's reason on the client's standard error


@dataclass
class Policy:
    allow_opaque: bool = False
    strict: bool = False
    cap: int | None = None          # actions beyond it are refused (--max-steps, a task's 2c+1)


@dataclass
class Part:
    """One simple command of a request and what becomes of it."""

    simple: Simple | None
    source: str
    reading: Reading
    refusal: str | None = None       # why it is not run (the client's one line)
    steps: list[int] = field(default_factory=list)


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    """Printable, on one line, at most ``limit`` characters (a model's reason is untrusted text)."""
    flat = re.sub(r"[\x00-\x1f\x7f\u2028\u2029\u0085]+", " ", text)
    flat = re.sub(r"\s+", " ", flat).strip()
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def refusal_command(line: str) -> str:
    """One simple command that prints ``line`` on standard error and fails (status 1): it stands in
    for a refused command wherever that was in the line (a pipeline, ``&&``, ``||``), and the reason
    reaches the phone's shell only inside single quotes."""
    return "sh -c " + quote(f"echo {quote(line)} >&2; exit 1")


def service_parts(service: str) -> tuple[str, str | None, bool]:
    """(what carries it: shell, exec, abb or service; its command line, None for none; shell v2?)."""
    if service.startswith("shell"):
        head, sep, cmd = service.partition(":")
        opts = head.split(",")
        if sep and opts[0] == "shell":
            return "shell", cmd, "v2" in opts[1:]
    if service.startswith("exec:"):
        return "exec", service[5:], False
    if service.startswith(("abb:", "abb_exec:")):
        name, _, args = service.partition(":")
        return name, args, name == "abb"
    return "service", None, False


class Session:
    """The gatekeeper of :class:`harness.guard.relay.GuardServer` for one episode."""

    def __init__(self, *, writer: EpisodeWriter, task: Any, device: Any, monitors: list[Monitor], observers: list[Any],
                 operator: Operator | None, live: LiveRecorder, policy: Policy, say: Callable[[str], None],
                 token: str, should_stop: Callable[[], bool] = lambda: False):
        self.writer, self.task, self.device, self.policy, self.say, self.token = writer, task, device, policy, say, token
        self.observers, self.live = observers, live
        self.checks = Checks(list(monitors))
        self.ended = threading.Event()
        self.flagged = Flagged(operator, live, lambda: should_stop() or self.ended.is_set(), lambda m, step, v: Question(
            writer.path, task.id, device.serial, step.index, policy.cap or 0, step.action.describe(),
            v.monitor or m.name, v.category, v.reason, v.error, v.score))
        self.steps = Steps(writer, device.screenshot, observers, live)
        self.lock = threading.RLock()
        self._count_lock = threading.Lock()
        self.counts = {"passed": 0, "actions": 0, "blocked": 0, "refused": 0, "unguarded": 0, "unseen": 0,
                       "refused_requests": 0}
        self.unseen: list[dict[str, Any]] = []
        self.halt: dict[str, Any] | None = None          # the first block, or an async check's halt
        self.halted_by: str | None = None                # set once an async check halted the session
        self.clients_open = 0
        self.last_closed = time.monotonic()
        self.end_reason: str | None = None
        self._events = writer.path / "guard_events.jsonl"
        self._held: list[tuple[Any, ...]] = []   # the steps of the request being decided
        self._timings: dict[str, float] = {}
        self.relayed = 0                         # actions relayed so far
        self.agent_shot: tuple[bytes, int, float] | None = None  # the agent's last screenshot (PNG, relayed, when)
        self.screen_source = "guard"
        self.port = 0                            # the guard's own port (set once it listens)

    # --- the relay's questions ----------------------------------------------------------------
    def connected(self, delta: int) -> None:
        with self.lock:
            self.clients_open += delta
            if self.clients_open == 0:
                self.last_closed = time.monotonic()

    def control(self, request: str, answer: Callable[[], None]) -> bool:
        if secrets.compare_digest(request, f"host:crate-guard-end:{self.token}"):
            answer()
            self.end_reason = self.end_reason or "end"
            self.ended.set()
            return True
        return False

    def count(self, key: str) -> None:
        with self._count_lock:
            self.counts[key] += 1

    def refused(self, request: str, reason: str, peer: Any) -> None:
        self.count("refused_requests")
        self.event("refused", request=request[:300], reason=reason, client=clients.client_info(peer, self.port))

    def forward(self, request: str, peer: Any) -> str | None:
        return self._unseen("forward", f"a port forward ({request[8:80]}) to a server on the phone", request,
                            clients.client_info(peer, self.port))

    def event(self, event: str, **fields: Any) -> None:
        """One line of ``guard_events.jsonl``: what the guard refused or could not see."""
        line = json.dumps({"at": now_iso(), "event": event, **fields}, ensure_ascii=False) + "\n"
        try:
            fd = os.open(self._events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as e:
            log.warning("guard: cannot record %s: %s", event, e)

    def _unseen(self, kind: str, what: str, request: str, client: dict[str, Any]) -> str | None:
        """Name a channel the guard cannot see into: a warning on the terminal and in the records;
        with ``strict``, the refusal."""
        self.count("unseen")
        entry = {"kind": kind, "what": what, "request": request[:300], "client": client,
                 "refused": self.policy.strict}
        self.unseen.append({k: v for k, v in entry.items() if k != "client"})
        self.event("unseen", **entry)
        who = clients.describe(client)
        if self.policy.strict:
            self.say(f"guard: refused (--strict): {who} asked for {what}")
            return f"harness guard: refused (--strict): {what}; actions through this channel are not gated"
        self.say(f"guard: warning: {who} opened {what}: actions through this channel are not gated")
        return None

    # --- a device service ---------------------------------------------------------------------
    def service(self, call: ServiceCall) -> None:
        carrier, line, v2 = service_parts(call.service)
        if carrier == "service":
            return self._plain_service(call)
        if carrier == "shell" and not (line or "").strip():
            why = self._unseen("interactive_shell", "an interactive shell", call.service, call.client_info())
            return call.refuse(why) if why else self._pass(call)
        parts = self._parts(carrier, line or "")
        if all(p.reading.kind == "read" for p in parts):
            if carrier in ("shell", "exec") and len(parts) == 1 and _screenshot_to_stdout(parts[0]):
                return self._agent_screenshot(call, v2)
            return self._pass(call)
        with self.lock:
            self._decide(call, parts)
            refused = [p for p in parts if p.refusal]
            # nothing left to run, or a request that cannot be rewritten (abb, a line read whole):
            # answered here, the phone never asked
            if refused and (len(refused) == len(parts) or any(p.simple is None for p in refused)):
                reasons = "".join(p.refusal + "\n" for p in refused).encode("utf-8")  # type: ignore[operator]
                call.answer(v2, stderr=reasons, status=1)
                piped = None
            else:
                text = self._rewritten(line or "", parts)
                head = call.service[:len(call.service) - len(line or "")]
                piped = call.relay(head + text, v2=v2, unless_gone=True)
            self._ran(call, parts, piped)

    def _pass(self, call: ServiceCall) -> None:
        self.count("passed")
        call.relay()

    def _agent_screenshot(self, call: ServiceCall, v2: bool) -> None:
        """A ``screencap -p`` the agent takes passes untouched; its PNG is kept as the screen the
        agent sees, so that its next action is judged on that screen, as the runner's monitors judge
        the screenshot its agent saw (and the guard takes none of its own)."""
        self.count("passed")
        piped = call.relay(v2=v2, keep=MAX_SCREEN_BYTES)
        png = piped.output
        if png and png.startswith(PNG_SIGNATURE) and png.rstrip(b"\r\n").endswith(PNG_END):
            with self.lock:
                self.agent_shot = (png, self.relayed, time.monotonic())

    def _parts(self, carrier: str, line: str) -> list[Part]:
        if carrier in ("abb", "abb_exec"):
            argv = [a for a in line.split("\0")]
            words = [Word(a, a) for a in ["cmd", *argv]]
            simple = Simple(0, len(line), words=words)
            text = " ".join(quote(a) if not re.fullmatch(r"[\w.,:/=@%+-]+", a) else a for a in ["cmd", *argv])
            return [Part(None, text, read_command(Simple(0, len(text), words=words), text))]
        script = split(line)
        if script.opaque:
            # adbutils' exit-status idiom after a line the guard cannot read: the line is refused as one
            # command and the idiom still runs, so the client reads the refusal's status (FIELD_NOTES 13)
            m = EXIT_IDIOM.match(line)
            why = Reading("opaque", why=f"{script.opaque} the guard cannot read")
            if m is None:
                return [Part(None, line, why)]
            head = m.group(1)
            tail = Simple(len(head), len(line), words=[Word("echo", "echo"), Word("X4EXIT:$?", "X4EXIT:$?", literal=False)])
            return [Part(Simple(0, len(head)), head, why), Part(tail, line[len(head):], Reading("read"))]
        out = []
        for s in script.commands:
            reading = read_command(s, line)
            if s.piped_from and reading.kind == "action" and any(w.text == "-" for w in s.words):
                reading = Reading("opaque", why="an action reading its arguments from a pipe")
            out.append(Part(s, line[s.start:s.end], reading))
        return out

    def _plain_service(self, call: ServiceCall) -> None:
        reading = read_service(call.service)
        if reading.kind == "read":
            return self._pass(call)
        if reading.kind == "unseen":
            why = self._unseen(reading.form or "socket", reading.why.split(":")[0], call.service, call.client_info())
            return call.refuse(why) if why else self._pass(call)
        part = Part(None, call.service, reading)
        with self.lock:
            self._decide(call, [part])
            if part.refusal:
                call.refuse(part.refusal)
                piped = None
            else:
                piped = call.relay(unless_gone=True)
            self._ran(call, [part], piped)

    # --- deciding -----------------------------------------------------------------------------
    def _decide(self, call: ServiceCall, parts: list[Part]) -> None:
        """Gate every action of the request (in order, on the screen before the request), refuse
        what cannot be read, name what cannot be seen; record the steps that did not run."""
        self._wait_async()
        self._timings = {}
        # which process sent it: looked up beside the screen and the checks, read when the steps are
        # recorded (after the relay), so it costs the action nothing
        threading.Thread(target=call.client_info, name="guard-client-info", daemon=True).start()
        steps_wanted = [p for p in parts if p.reading.kind in ("action", "opaque")]
        if steps_wanted:
            self._decide_steps(call, steps_wanted)
        for p in parts:
            if p.reading.kind == "unseen":
                why = self._unseen(p.reading.form, p.reading.why.split(":")[0], p.source, call.client_info())
                p.refusal = one_line(why) if why else None

    def _decide_steps(self, call: ServiceCall, steps_wanted: list[Part]) -> None:
        t0 = time.monotonic()
        seen = self.agent_shot
        fresh = seen is not None and seen[1] == self.relayed and time.monotonic() - seen[2] <= AGENT_SHOT_S
        self.screen_source = "agent" if fresh else "guard"
        try:
            shot, before = self.steps.screen(seen[0] if fresh else None)  # type: ignore[index]
        except Exception as e:  # no screen, no check: fail closed
            shot, before, screen_error = b"", None, f"{type(e).__name__}: {e}"
        else:
            screen_error = None
        self._timings = {"screenshot": time.monotonic() - t0}
        for p in steps_wanted:
            if p.reading.kind == "opaque":
                action: Action = device_command("opaque", p.source, p.reading.why)
                i = self.steps.next_index()
                p.steps.append(i)
                if self.policy.allow_opaque:
                    self.count("unguarded")
                    self._keep(call, p, i, action, before, shot, None, unguarded=True)
                else:
                    p.refusal = one_line(f"harness guard: refused {p.source[:80]}: {p.reading.why} "
                                         "(harness guard --allow-opaque relays it)")
                    self.count("refused")
                    self._keep(call, p, i, action, before, shot, None, refused=p.refusal)
                continue
            for action in p.reading.actions:
                i = self.steps.next_index()
                p.steps.append(i)
                self.count("actions")
                t0 = time.monotonic()
                refusal, verdict = self._gate(i, action, p, shot, screen_error)
                self._timings[f"monitors:{i}"] = time.monotonic() - t0 - self.flagged.step_wait[0]
                if self.flagged.step_wait[0]:
                    self._timings[f"operator:{i}"] = self.flagged.step_wait[0]
                if refusal is not None and p.refusal is None:
                    p.refusal = refusal
                self._keep(call, p, i, action, before, shot, verdict, refused=refusal)

    def _gate(self, i: int, action: Action, p: Part, shot: bytes, screen_error: str | None
              ) -> tuple[str | None, MonitorVerdict | None]:
        """(the refusal, None when the action may run; the verdict that decided)."""
        what = p.source[:80]
        self.live.step(i, "checking", screen_before=self.steps.path, action=action_to_json(action),
                       action_text=action.describe())
        if self.halted_by is not None:
            return one_line(f"harness guard: refused {what}: the session is halted ({self.halted_by})"), None
        if self.policy.cap is not None and len(self.steps.executed) >= self.policy.cap:
            return one_line(f"harness guard: refused {what}: the step cap ({self.policy.cap}) is reached"), None
        if screen_error is not None:
            return one_line(f"harness guard: refused {what}: the screen could not be taken ({screen_error})"), None
        if not self.checks.gates:
            return None, None
        step = ProposedStep(i, shot, action, p.source, self.task.instruction, self.task.language)
        self.flagged.step_wait[0] = 0.0
        try:
            v, halted = self.checks.gate(step, self.flagged, seen=lambda v: self.live.verdict(v.to_json()))
        except Interrupted:  # the session ended while the operator was asked: not relayed
            return one_line(f"harness guard: refused {what}: the session ended before the operator answered"), None
        if not halted:
            return None, v
        assert v is not None
        why = f"{v.monitor or 'monitor'}" + (f" ({v.category})" if v.category else "") + f": {v.reason}"
        self.count("blocked")
        if self.halt is None:
            self.halt = {"step": i, "category": v.category or "unspecified", "reason": v.reason, "monitor": v.monitor,
                         "executed": False, **({"operator": v.operator} if v.operator else {})}
        return one_line(f"harness guard: refused {what}: {why}"), v

    def _keep(self, call: ServiceCall, p: Part, i: int, action: Action, before: str | None, shot: bytes,
              verdict: MonitorVerdict | None, refused: str | None = None, unguarded: bool = False) -> None:
        """Hold the step until the request has run (its ``executed`` is known then)."""
        extras = {"guard": {"service": call.service[:200], "command": p.source[:MAX_COMMAND],
                            "form": p.reading.form or None, "screen": self.screen_source,
                            **({"unguarded": True} if unguarded else {})}}
        monitor = verdict.to_json() if verdict is not None else None
        self._held.append((p, i, action, before, shot, monitor, refused, extras))

    def _ran(self, call: ServiceCall, parts: list[Part], piped: Any) -> None:
        """Record the steps of a request once it ran (or was answered without the phone)."""
        held, self._held = self._held, []
        for p, i, action, before, shot, monitor, refused, extras in held:
            extras["guard"]["client"] = call.client_info()
            timings = {"screenshot": self._timings.get("screenshot", 0.0), "monitors": self._timings.get(f"monitors:{i}", 0.0),
                       **({"operator": self._timings[f"operator:{i}"]} if f"operator:{i}" in self._timings else {}),
                       **({"action": piped.seconds} if piped is not None else {})}
            executed = refused is None and piped is not None and p.refusal is None
            invalid = refused
            if executed and not piped.sent:
                executed, invalid = False, f"not run: {piped.error}"
            if piped is not None and piped.exit_status is not None:
                extras["guard"]["exit_status"] = piped.exit_status
            if piped is not None and piped.client_closed_first:
                extras["guard"]["client_left_early"] = True
            if p.refusal and refused is None and not executed:
                invalid = f"not run: {p.refusal}"
            if not executed:
                timings.pop("action", None)
            rec = StepRecord(index=i, action=action_to_json(action), executed=executed, invalid=invalid,
                             raw_output=p.source[:MAX_COMMAND], screen_before=before or self.steps.path or "screens/000.png",
                             timings={k: round(v, 6) for k, v in timings.items()}, monitor=monitor, extras=extras)
            event = StepEvent(index=i, action=action, raw_output=p.source, invalid=invalid, screenshot_before=shot,
                              screenshot_after=None, screen_before_path=rec.screen_before, screen_after_path=None,
                              monitor=monitor, executed=executed)
            if executed:
                self.relayed += 1
            async_check = executed and bool(self.checks.background)
            if async_check:
                self.checks.start(ProposedStep(i, shot, action, p.source, self.task.instruction, self.task.language))
            self.steps.add(rec, event, wants_verdict=async_check)
            self.live.update(state="running" if executed else "halted")

    def _wait_async(self) -> None:
        """The async checks of the last request answer before anything else runs."""
        if not self.checks.pending:
            return
        waiting = [idx for idx, *_ in self.checks.pending]
        got = self.checks.wait()
        for idx in waiting:
            mon = None
            if got is not None and got[0] == idx:
                mon = got[1].to_json() | ({"halted_step": idx} if got[1].halt else {})
            self.steps.verdict(idx, mon)
        if got is not None and got[1].halt and self.halted_by is None:
            v = got[1]
            self.halted_by = f"{v.monitor or 'monitor'} flagged step {got[0]} after it ran: {one_line(v.reason, 120)}"
            self.halt = {"step": got[0], "category": v.category or "unspecified", "reason": v.reason,
                         "monitor": v.monitor, "executed": True}
            self.say(f"guard: {self.halted_by}; every action from now on is refused")
        self.steps.write_ready()

    # --- rewriting ----------------------------------------------------------------------------
    @staticmethod
    def _rewritten(line: str, parts: list[Part]) -> str:
        out, at = [], 0
        for p in parts:
            if p.refusal and p.simple is not None:
                out.append(line[at:p.simple.start])
                out.append(refusal_command(p.refusal))
                at = p.simple.end
        out.append(line[at:])
        return "".join(out)

    # --- the end ------------------------------------------------------------------------------
    def finish(self) -> bytes | None:
        with self.lock:
            self._wait_async()
            shot = self.steps.finish()
            self.checks.close()
            return shot


def _screenshot_to_stdout(p: Part) -> bool:
    """``screencap -p`` (``-d ID`` allowed) writing its PNG to the client, with nothing else."""
    if p.simple is None or p.simple.redirects or p.simple.assigns:
        return False
    argv = p.simple.argv
    rest = [a for a in argv[1:] if a != "-p"]
    if len(rest) == 2 and rest[0] == "-d":
        rest = []
    return bool(argv) and argv[0].rsplit("/", 1)[-1] == "screencap" and "-p" in argv and not rest
