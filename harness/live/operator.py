"""``--monitor-mode ask``: a person decides about a flagged action before it runs.

A gate monitor in ``ask`` mode whose verdict would halt (the action is risky by its rules, or the
check could not answer) does not halt at once: the runner asks the operator. The question goes to
every channel at once: the controlling terminal (a prompt; questions from several devices one at
a time) and the live page (Allow / Deny buttons; ``pending.json`` says what is asked). The answer
is a decision record (``harness.live.records.claim_decision``): whichever channel writes it first
wins, in this process or another (``harness view --live RUN``). No answer within the timeout is a
deny, recorded as such (``by: timeout``). A denied action is halted exactly as a gate halts it.

Text from the model (the monitor's reason and category, the proposed action) is untrusted: it is
shown on the terminal with control characters replaced, so it cannot move the cursor, retitle the
window or fake a prompt.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import select
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, TextIO

from harness.core.episode import ANSWERS, Decision, LiveRecorder, OperatorStep, Question, nobody_to_ask
from harness.live.records import EpisodeLive, claim_decision, new_ask_id, wait_decision
from harness.records import now_iso

__all__ = ["ASK_TIMEOUT_S", "HANDOVER_TIMEOUT_S", "Decision", "Operator", "Question", "Terminal", "nobody_to_ask",
           "shown"]

ASK_TIMEOUT_S = 120.0
HANDOVER_TIMEOUT_S = 600.0  # a login or a PIN takes a person a minute or two; ten is generous, not endless
POLL_S = 0.05  # how often a decision written by another process is looked for

WORDS = {"a": "allow", "allow": "allow", "y": "allow", "yes": "allow",
         "d": "deny", "deny": "deny", "n": "deny", "no": "deny"}


@dataclass
class _Ticket:
    """One open question, shared by the asking thread and the terminal's."""

    ask_id: str
    question: Question
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    standing: dict[str, Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def offer(self, decision: str, by: str) -> dict[str, Any]:
        """Answer ``decision`` from ``by``: the answer that stands (this one unless one came first)."""
        with self.lock:
            if self.standing is not None:
                return self.standing
            try:
                record, _ = claim_decision(self.question.episode_dir, self.ask_id, decision, by)
            except OSError:  # nothing can be written, not even another channel's answer: this one stands
                record = {"ask_id": self.ask_id, "decision": decision, "by": by, "at": now_iso()}
            self.standing = record
            return record

    def settle(self, record: dict[str, Any]) -> None:
        with self.lock:
            if self.standing is None:
                self.standing = record
        self.done.set()


def shown(text: Any, limit: int = 500) -> str:
    """Untrusted text for a terminal: control characters (escape sequences, carriage returns,
    backspaces) become visible escapes, and it is cut at ``limit`` characters."""
    s = "" if text is None else str(text)
    out = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)
    return out if len(out) <= limit else out[: limit - 1] + "…"


class Terminal:
    """The operator's terminal: prompts there, reads one line per answer. Questions from several
    devices are asked one at a time; one that is answered elsewhere meanwhile is never asked."""

    def __init__(self, fd: int, out: TextIO):
        self.fd, self.out = fd, out
        self.turn = threading.Lock()
        self.pause: Callable[[], ContextManager[Any]] = contextlib.nullcontext  # e.g. a live progress display

    @classmethod
    def open(cls) -> "Terminal | None":
        """The terminal of this process: standard input when it is one, else the controlling
        terminal (``/dev/tty``); None when there is neither (a pipe, a job scheduler)."""
        try:
            if sys.stdin is not None and sys.stdin.isatty():
                fd = sys.stdin.fileno()
                out = sys.stderr if sys.stderr is not None and sys.stderr.isatty() else \
                    open(os.ttyname(fd), "w", encoding="utf-8", errors="replace")
                return cls(fd, out)
        except (OSError, ValueError):
            pass
        try:
            fd = os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0))
        except OSError:
            return None
        return cls(fd, open(os.dup(fd), "w", encoding="utf-8", errors="replace"))

    def _say(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            pass

    def ask(self, ticket: _Ticket) -> None:
        """Ask ``ticket``'s question when it is this question's turn (in a thread of its own)."""
        self._in_turn(ticket, self._question_text, WORDS.get, "  please type a (allow) or d (deny): ")

    def hand_over(self, ticket: _Ticket) -> None:
        """Tell of a hand-over and wait for Enter (hand back) or ``g`` (give up), in a thread of its own."""
        self._in_turn(ticket, self._hand_over_text, _hand_over_choice,
                      "  press Enter to hand the phone back, or g to give up: ")

    def _in_turn(self, ticket: _Ticket, text: Callable[[_Ticket], str], choose: Callable[[str], str | None],
                 again: str) -> None:
        """When it is ``ticket``'s turn: show ``text(ticket)`` and read answers until ``choose`` reads one
        (``again`` asks once more), the ticket is decided elsewhere (page, timeout) or the terminal goes."""
        while not self.turn.acquire(timeout=0.1):
            if ticket.done.is_set():
                return
        try:
            if not ticket.done.is_set():
                with self.pause():
                    self._converse(ticket, text(ticket), choose, again)
        finally:
            self.turn.release()

    def _converse(self, ticket: _Ticket, text: str, choose: Callable[[str], str | None], again: str) -> None:
        with contextlib.suppress(Exception):  # what was typed before the question is not its answer
            import termios
            termios.tcflush(self.fd, termios.TCIFLUSH)
        self._say(text)  # (flushed before it shows: an answer typed once it shows counts)
        while True:
            if ticket.done.is_set():
                self._say(f"\n  {_outcome(ticket.standing)}\n")
                return
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                data = b""
            if not data:  # the terminal went away: the page or the timeout decides
                self._say("\n  (the terminal closed; the live page or the timeout decides)\n")
                return
            choice = choose(data.decode("utf-8", "replace").strip().lower())
            if choice is None:
                self._say(again)
                continue
            self._say(f"  {_outcome(ticket.offer(choice, 'terminal'))}\n")
            return

    @staticmethod
    def _question_text(ticket: _Ticket) -> str:
        q = ticket.question
        left = max(0, round(ticket.deadline - time.monotonic()))
        lines = [f"\n[{shown(q.device, 80)}] {shown(q.task_id, 128)} step {q.step}/{q.cap}: "
                 f"{shown(q.monitor, 60)} flags the proposed action",
                 f"  action:   {shown(q.action)}",
                 f"  category: {shown(q.category or ('monitor_error' if q.error else 'unspecified'), 80)}",
                 f"  reason:   {shown(q.reason)}"]
        if q.error:
            lines.append(f"  (the check could not answer: {shown(q.error, 200)})")
        lines.append(f"  Allow or deny? [a]llow / [d]eny, then Enter (no answer in {left} s denies): ")
        return "\n".join(lines)

    @staticmethod
    def _hand_over_text(ticket: _Ticket) -> str:
        q = ticket.question
        left = max(0, round(ticket.deadline - time.monotonic()))
        return "\n".join([
            f"\n[{shown(q.device, 80)}] {shown(q.task_id, 128)} step {q.step}/{q.cap}: the agent hands the phone to you",
            f"  it asks: {shown(q.reason or '(nothing more)')}",
            "  Do it on the phone (your touches are recorded as operator steps), then press Enter to hand it back",
            f"  (g then Enter gives up: the episode ends needs_user; not handed back in {left} s, it ends so too): "])


def _hand_over_choice(word: str) -> str | None:
    """A terminal's answer to a hand-over: Enter (or b, back, done) hands back; g (give up, q) gives up."""
    if word in ("", "b", "back", "done", "hand back"):
        return "hand_back"
    return "give_up" if word in ("g", "give up", "giveup", "q") else None


PAST = {"allow": "allowed", "deny": "denied", "hand_back": "handed back", "give_up": "given up"}


def _outcome(record: dict[str, Any] | None) -> str:
    """What the terminal says about the answer that stands."""
    if not record:
        return "(the run is stopping)"
    done = PAST.get(record.get("decision", ""), "?")
    by = record.get("by")
    return done if by == "terminal" else f"no answer in time: {done}" if by == "timeout" else f"{done} on the {by}"


class Operator:
    """Asks about flagged actions on its channels and waits for the first answer, up to
    ``timeout_s`` (then: deny). ``page``: the live page can answer (``--watch``); decisions
    written by another process (``harness view --live RUN``) are taken whatever the channels.
    It implements :class:`harness.core.episode.Operator`; the live records it reads its questions from
    are the episode folder's (:class:`harness.live.records.EpisodeLive`)."""

    def __init__(self, timeout_s: float = ASK_TIMEOUT_S, terminal: Terminal | None = None, page: bool = False,
                 handover_timeout_s: float = HANDOVER_TIMEOUT_S, hand_over_ok: bool = True):
        if not timeout_s > 0:
            raise ValueError("the ask timeout must be > 0 seconds")
        if not handover_timeout_s > 0:
            raise ValueError("the hand-over timeout must be > 0 seconds")
        self.timeout_s, self.terminal, self.page = timeout_s, terminal, page
        self.handover_timeout_s, self.hand_over_ok = handover_timeout_s, hand_over_ok

    @property
    def can_hand_over(self) -> bool:
        """Someone could take the phone: a channel is open and hand-overs are not refused (--no-handover)."""
        return self.hand_over_ok and bool(self.channels)

    @property
    def channels(self) -> list[str]:
        return [name for name, on in (("terminal", self.terminal is not None), ("page", self.page)) if on]

    def spec(self) -> dict[str, Any]:
        return {"ask_timeout_s": self.timeout_s, "channels": self.channels,
                "handover_timeout_s": self.handover_timeout_s if self.can_hand_over else None}

    def live_records(self, episode_dir: str | os.PathLike[str]) -> EpisodeLive:
        return EpisodeLive(episode_dir)

    def ask(self, q: Question, live: LiveRecorder | None = None,
            should_stop: Callable[[], bool] = lambda: False) -> Decision | None:
        """The operator's decision about ``q``, or None when the run is stopping meanwhile."""
        ask_id = new_ask_id(q.step)
        t0 = time.monotonic()
        asked_at = now_iso()
        ticket = _Ticket(ask_id, q, t0 + self.timeout_s)
        info = {"id": ask_id, "monitor": q.monitor, "category": q.category, "reason": q.reason, "error": q.error,
                "score": q.score, "action": q.action, "asked_at": asked_at, "timeout_s": self.timeout_s,
                "deadline_at": _iso_after(self.timeout_s), "channels": self.channels, "decision": None}
        if live is not None:
            live.update(state="asking", ask=info)
        record = self._answer(ticket, self.terminal.ask if self.terminal is not None else None, "deny", should_stop)
        if record is None:
            return None
        decision = _decision(q, record, time.monotonic() - t0, ask_id, asked_at)
        if live is not None:
            live.update(state="running" if decision.allowed else "halted", ask={**info, "decision": decision.to_json()})
        return decision


    @staticmethod
    def _answer(ticket: _Ticket, terminal: Callable[[_Ticket], None] | None, refusal: str,
                should_stop: Callable[[], bool]) -> dict[str, Any] | None:
        """The answer that stands to ``ticket``'s question: the terminal's (asked on a thread of its
        own), the page's or another process's (a decision record), or ``refusal`` by timeout at the
        deadline; None when the run is stopping meanwhile."""
        thread = None
        if terminal is not None:
            thread = threading.Thread(target=terminal, args=(ticket,), name=f"ask-{ticket.ask_id}", daemon=True)
            thread.start()
        record: dict[str, Any] | None = None
        try:
            while record is None:
                left = max(0.0, ticket.deadline - time.monotonic())
                record = ticket.standing or wait_decision(ticket.question.episode_dir, ticket.ask_id, min(POLL_S, left))
                if record is not None:
                    break
                if should_stop():
                    return None
                if time.monotonic() >= ticket.deadline:
                    record = ticket.offer(refusal, "timeout")
        finally:
            if record is not None:
                ticket.settle(record)
            ticket.done.set()
            if thread is not None:
                thread.join(timeout=2.0)
        return record

    def hand_over(self, q: Question, device: Any, live: LiveRecorder | None,
                  on_step: Callable[[OperatorStep], None],
                  should_stop: Callable[[], bool] = lambda: False) -> Decision | None:
        """Hand the phone to a person (``q.kind`` needs_user): show what the agent asks on every
        channel, record their touches on ``device`` (each to ``on_step``) until they hand it back
        or give up (a channel's answer) or ``handover_timeout_s`` passes (give_up by timeout);
        None when the run is stopping meanwhile. A phone whose touches cannot be read is handed
        over all the same: the person's steps are then missing, and the record says why."""
        from harness.live.handover import HandoverError, OperatorTouches

        ask_id = new_ask_id(q.step)
        t0 = time.monotonic()
        asked_at = now_iso()
        ticket = _Ticket(ask_id, q, t0 + self.handover_timeout_s)
        info: dict[str, Any] = {"id": ask_id, "kind": "needs_user", "text": q.reason, "action": q.action,
                                "asked_at": asked_at, "timeout_s": self.handover_timeout_s,
                                "deadline_at": _iso_after(self.handover_timeout_s), "channels": self.channels,
                                "decision": None, "operator_steps": 0}
        steps = [0]

        def counted(op: OperatorStep) -> None:
            on_step(op)
            steps[0] += 1
            if live is not None:
                info["operator_steps"] = steps[0]
                live.update(ask=dict(info))

        def ready(gestures: int) -> None:
            if live is not None:
                info["ready"] = gestures
                live.update(ask=dict(info))

        unread: str | None = None
        touches = None
        try:
            touches = OperatorTouches(device, counted, ready=ready)
            touches.start()
        except HandoverError as e:
            unread, touches = str(e), None
            info["unread"] = unread
        if live is not None:
            live.update(state="handed_over", ask=dict(info))
        try:
            record = self._answer(ticket, self.terminal.hand_over if self.terminal is not None else None, "give_up",
                                  should_stop)
        finally:
            if touches is not None:
                touches.stop()  # the steps still being read are recorded before the agent goes on
        if touches is not None and touches.lost:  # read up to a point: what came after is the person's, unread
            unread = f"the touches stopped being read ({touches.lost})"
        if record is None:
            return None
        decision = _decision(q, record, time.monotonic() - t0, ask_id, asked_at, unread)
        if live is not None:
            live.update(state="running" if decision.allowed else "needs_user",
                        ask={**info, "decision": decision.to_json()})
        return decision


def _decision(q: Question, record: dict[str, Any], wait_s: float, ask_id: str, asked_at: str,
              unread: str | None = None) -> Decision:
    """The decision a record answers ``q`` with. An answer that is not one of ``q``'s kind (a
    hand_back written for a flagged action) is that kind's refusing answer, and the note says so:
    a question is only ever let through by its own yes."""
    answers = ANSWERS.get(q.kind, ("", ""))
    decision, note = record["decision"], None
    if decision not in answers:
        note = f"{decision!r} by {record.get('by')} is not an answer to a {q.kind} question: read as {answers[-1]}"
        decision = answers[-1]
    if unread:
        note = "; ".join(filter(None, [note, f"the person's touches were not recorded: {unread}"]))
    return Decision(decision, record["by"], wait_s, ask_id, asked_at, record.get("at") or now_iso(), note=note,
                    kind=q.kind, unread=unread)


def _iso_after(seconds: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
