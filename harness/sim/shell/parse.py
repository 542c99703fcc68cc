"""The simulated shell's parser: command lines into words, redirects, pipelines and lists.

It understands single/double quotes, backslash escapes, ``$?``/``$VAR``/``${VAR}``/``$(cmd)``/
backticks, ``VAR=value cmd`` prefixes, ``;`` ``&&`` ``||`` ``|`` ``&`` (run in the foreground),
redirections (``>`` ``>>`` ``<`` ``2>`` ``2>&1`` ``>&2`` ``&>``), ``#`` comments and ``!``. A quoted
string is always one word and never runs as a command. Control flow keywords (``if``/``for``/
``while``/``case``) are not supported and say so (ShellSyntaxError).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class ShellSyntaxError(Exception):
    pass


@dataclass
class Seg:
    """One piece of a word: ``lit`` text, a ``var`` to expand, or a ``cmd`` substitution."""

    kind: str
    text: str
    quoted: bool


Word = list[Seg]


@dataclass
class Redirect:
    fd: int
    op: str  # '>', '>>', '<', '>&', '&>'
    target: Word


@dataclass
class Simple:
    assigns: list[tuple[str, Word]] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Pipeline:
    stages: list[Simple]
    negate: bool = False


Script = list[tuple[str, Pipeline]]  # (connector before it: ';' '&&' '||', pipeline)

_REDIR_RE = re.compile(r"(\d?)(>>|>&|<&|>\||>|<)")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_UNSUPPORTED = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function", "select"}


class _Parser:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0
        self.n = len(src)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < self.n else ""

    def skip_blanks(self) -> None:
        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "#":
                while self.i < self.n and self.s[self.i] != "\n":
                    self.i += 1
            else:
                break

    def parse_script(self, until: str = "") -> Script:
        items: Script = []
        conn = ";"
        while True:
            self.skip_blanks()
            while self.peek() in ("\n", ";") and self.peek():
                if self.peek() == ";" and conn != ";":
                    raise ShellSyntaxError("unexpected ';'")
                self.i += 1
                self.skip_blanks()
            if self.i >= self.n or (until and self.peek() == until):
                if conn != ";":
                    raise ShellSyntaxError("unexpected end of file")
                return items
            items.append((conn, self.parse_pipeline()))
            self.skip_blanks()
            c = self.peek()
            if self.s.startswith("&&", self.i) or self.s.startswith("||", self.i):
                conn = self.s[self.i : self.i + 2]
                self.i += 2
                self.skip_blanks()
                while self.peek() == "\n":
                    self.i += 1
                    self.skip_blanks()
            elif c in (";", "\n", "&"):
                conn = ";"
                self.i += 1
            elif c == "" or (until and c == until):
                conn = ";"
            else:
                raise ShellSyntaxError(f"unexpected '{c}'")

    def parse_pipeline(self) -> Pipeline:
        negate = False
        self.skip_blanks()
        if self.peek() == "!" and self.peek(1) in (" ", "\t"):
            negate = True
            self.i += 1
        stages = [self.parse_simple()]
        while True:
            self.skip_blanks()
            if self.peek() == "|" and self.peek(1) != "|":
                self.i += 1
                self.skip_blanks()
                while self.peek() == "\n":
                    self.i += 1
                    self.skip_blanks()
                stages.append(self.parse_simple())
            else:
                return Pipeline(stages, negate)

    def parse_simple(self) -> Simple:
        cmd = Simple()
        while True:
            self.skip_blanks()
            c = self.peek()
            if c == "" or c == "\n" or c == ";" or c == ")":
                break
            if c == "&" and self.peek(1) == ">":
                self.i += 2
                self.skip_blanks()
                cmd.redirects.append(Redirect(1, "&>", self.parse_word(required=True)))
                continue
            if c in "&|":
                break
            m = _REDIR_RE.match(self.s, self.i)
            if m:
                self.i = m.end()
                op = m.group(2)
                fd = int(m.group(1)) if m.group(1) else (0 if op in ("<", "<&") else 1)
                if op == ">|":
                    op = ">"
                self.skip_blanks()
                cmd.redirects.append(Redirect(fd, op, self.parse_word(required=True)))
                continue
            if c == "(":
                raise ShellSyntaxError("'(' unexpected (subshells are not supported)")
            word = self.parse_word(required=True)
            if not cmd.words:
                first = word[0] if word else None
                if first is not None and first.kind == "lit" and not first.quoted:
                    m2 = _ASSIGN_RE.match(first.text)
                    if m2:
                        rest = first.text[m2.end():]
                        value: Word = ([Seg("lit", rest, False)] if rest else []) + word[1:]
                        cmd.assigns.append((m2.group(1), value))
                        continue
                    if len(word) == 1 and first.text in _UNSUPPORTED:
                        raise ShellSyntaxError(f"'{first.text}' is not supported by the simulated shell")
            cmd.words.append(word)
        if not cmd.words and not cmd.assigns and not cmd.redirects:
            c = self.peek()
            raise ShellSyntaxError(f"unexpected '{c or 'end of file'}'")
        return cmd

    def parse_word(self, required: bool = False) -> Word:
        segs: Word = []
        lit: list[str] = []

        def flush() -> None:
            if lit:
                segs.append(Seg("lit", "".join(lit), False))
                lit.clear()

        start = self.i
        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t\r\n;&|<>()":
                break
            if c == "'":
                flush()
                j = self.s.find("'", self.i + 1)
                if j < 0:
                    raise ShellSyntaxError("unterminated quoted string")
                segs.append(Seg("lit", self.s[self.i + 1 : j], True))
                self.i = j + 1
            elif c == '"':
                flush()
                self.i += 1
                segs.extend(self.parse_dquote())
            elif c == "\\":
                if self.peek(1) == "\n":
                    self.i += 2
                elif self.i + 1 < self.n:
                    flush()
                    segs.append(Seg("lit", self.s[self.i + 1], True))
                    self.i += 2
                else:
                    lit.append("\\")
                    self.i += 1
            elif c == "$":
                flush()
                segs.append(self.parse_dollar(quoted=False))
            elif c == "`":
                flush()
                segs.append(self.parse_backtick(quoted=False))
            else:
                lit.append(c)
                self.i += 1
        flush()
        if required and self.i == start:
            c = self.peek()
            raise ShellSyntaxError(f"unexpected '{c or 'end of file'}'")
        return segs

    def parse_dquote(self) -> Word:
        segs: Word = []
        lit: list[str] = []

        def flush() -> None:
            segs.append(Seg("lit", "".join(lit), True))
            lit.clear()

        while True:
            if self.i >= self.n:
                raise ShellSyntaxError("unterminated quoted string")
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ('"', "\\", "$", "`", "\n"):
                if self.peek(1) != "\n":
                    lit.append(self.peek(1))
                self.i += 2
            elif c == "$":
                flush()
                segs.append(self.parse_dollar(quoted=True))
            elif c == "`":
                flush()
                segs.append(self.parse_backtick(quoted=True))
            else:
                lit.append(c)
                self.i += 1
        flush()
        return segs

    def parse_dollar(self, quoted: bool) -> Seg:
        self.i += 1  # '$'
        c = self.peek()
        if c and c in "?$#!@*0123456789":
            self.i += 1
            return Seg("var", c, quoted)
        if c == "{":
            j = self.s.find("}", self.i)
            if j < 0:
                raise ShellSyntaxError("missing '}'")
            name = self.s[self.i + 1 : j]
            self.i = j + 1
            return Seg("var", name, quoted)
        if c == "(":
            if self.peek(1) == "(":
                raise ShellSyntaxError("arithmetic $(( )) is not supported by the simulated shell")
            self.i += 1
            inner_start = self.i
            sub = _Parser(self.s)
            sub.i = self.i
            sub.parse_script(until=")")
            if sub.peek() != ")":
                raise ShellSyntaxError("missing ')'")
            inner = self.s[inner_start : sub.i]
            self.i = sub.i + 1
            return Seg("cmd", inner, quoted)
        m = _NAME_RE.match(self.s, self.i)
        if m:
            self.i = m.end()
            return Seg("var", m.group(0), quoted)
        return Seg("lit", "$", quoted)

    def parse_backtick(self, quoted: bool) -> Seg:
        j = self.s.find("`", self.i + 1)
        if j < 0:
            raise ShellSyntaxError("unterminated `")
        inner = self.s[self.i + 1 : j]
        self.i = j + 1
        return Seg("cmd", inner, quoted)


def parse(src: str) -> Script:
    """Parse a command line into and-or lists of pipelines (raises ShellSyntaxError)."""
    p = _Parser(src)
    script = p.parse_script()
    if p.i < p.n:
        raise ShellSyntaxError(f"unexpected '{p.peek()}'")
    return script


def static_argv(script: Script) -> list[list[str]]:
    """The argv of every simple command in ``script`` as written, before it runs: quotes removed,
    ``$VAR`` and ``$(...)`` left as text (what a command log can record even for a command that
    never returns)."""
    def word(w: Word) -> str:
        return "".join(seg.text if seg.kind == "lit" else ("$" + seg.text if seg.kind == "var" else f"$({seg.text})")
                       for seg in w)

    return [[word(w) for w in simple.words] for _, pipeline in script for simple in pipeline.stages if simple.words]
