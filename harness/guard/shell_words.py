"""A command line as the phone's shell splits it, for the guard to read what it will run.

Android's shell is mksh, a POSIX shell (POSIX.1-2017 XCU 2.2-2.10; mksh(1)): words are split on
blanks; ``'...'`` keeps everything literally; ``"..."`` keeps everything but ``$``, `````, ``\\``;
a backslash outside quotes keeps the next character; ``;``, ``&``, newline, ``&&``, ``||`` and ``|``
end a command; ``NAME=value`` words before the command name are assignments; ``[n]>``, ``>>``,
``<``, ``>&``, ``<&``, ``>|``, ``<>``, ``&>`` are redirections, ``#`` at a word's start comments to
the line's end. adbutils sends ``CMD; echo X4EXIT:$?`` (FIELD_NOTES section 13), mobile-mcp
backslash-escapes ``input text``'s argument, the adb binary joins its arguments with spaces.

What the guard cannot read as one fixed command is said, never guessed: a word with an expansion
(``$x``, ``${x}``, ``$(...)``, backquotes, ``$'...'``, ``~``) is not ``literal``, one with an
unquoted ``*``, ``?`` or ``[`` is a ``glob``; subshells, groups, here-documents, functions and
control flow (``if``, ``for``, ``while``, ``case``...) make the whole line ``opaque``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RESERVED = {"if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do", "done",
            "function", "select", "{", "}", "[[", "]]", "coproc"}
_BLANK = " \t\r"
_OPERATOR_CHARS = ";&|<>()\n"


@dataclass
class Word:
    text: str              # the word after quote removal (an expansion is kept as written)
    raw: str               # the word as written
    literal: bool = True   # no expansion: the shell passes exactly ``text``
    glob: bool = False     # an unquoted pattern character: the shell may expand it to file names


@dataclass
class Simple:
    """One simple command: its span in the line (assignments, words and redirections)."""

    start: int
    end: int
    assigns: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, Word]] = field(default_factory=list)  # (operator with its fd, target)
    piped_from: bool = False   # its standard input is the previous command's output (``a | b``)

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]


@dataclass
class Script:
    text: str
    commands: list[Simple] = field(default_factory=list)
    opaque: str | None = None  # why the line cannot be read as a list of simple commands


class _Opaque(Exception):
    pass


def split(text: str) -> Script:
    """The simple commands of ``text`` in order; ``opaque`` says why when they cannot be read."""
    out = Script(text)
    try:
        _Parser(text, out).run()
    except _Opaque as e:
        out.opaque = str(e)
    return out


class _Parser:
    def __init__(self, text: str, out: Script):
        self.s, self.i, self.n, self.out = text, 0, len(text), out
        self.cur: Simple | None = None
        self.pipe_next = False

    # --- commands -----------------------------------------------------------------------------
    def _end_command(self) -> None:
        if self.cur is not None:
            if self.cur.words or self.cur.assigns or self.cur.redirects:
                self.out.commands.append(self.cur)
            self.cur = None

    def run(self) -> None:
        s = self.s
        while True:
            self._blanks()
            if self.i >= self.n:
                self._end_command()
                return
            c = s[self.i]
            if c == "#":  # at a word's start: a comment
                while self.i < self.n and s[self.i] != "\n":
                    self.i += 1
                continue
            if c in "()":
                raise _Opaque("a subshell or group ( ... )")
            if c in ";&|\n" and not (c == "&" and s.startswith("&>", self.i)):
                two = s[self.i:self.i + 2]
                if two == ";;":
                    raise _Opaque("a case statement")
                if self.cur is None and c != "\n" and two not in ("||", "&&"):
                    if c in "|&" or (c == ";" and self.out.commands == []):
                        raise _Opaque(f"a '{c}' with no command before it")
                piped = c == "|" and two != "||"
                self._end_command()
                self.i += 2 if two in ("&&", "||") else 1
                self.pipe_next = piped
                continue
            if self._redirect():
                continue
            start = self.i
            word = self._word()
            self._add_word(word, start)

    def _blanks(self) -> None:
        while self.i < self.n:
            if self.s[self.i] in _BLANK:
                self.i += 1
            elif self.s.startswith("\\\n", self.i):
                self.i += 2
            else:
                return

    def _open(self, start: int) -> Simple:
        if self.cur is None:
            self.cur = Simple(start, start, piped_from=self.pipe_next)
            self.pipe_next = False
        return self.cur

    def _add_word(self, w: Word, start: int) -> None:
        cmd = self._open(start)
        cmd.end = self.i
        if not cmd.words and w.literal and _is_assignment(w.raw):
            cmd.assigns.append(w)
            return
        if not cmd.words and w.literal and w.raw in RESERVED:
            raise _Opaque(f"shell control flow ({w.raw})")
        if not cmd.words and w.raw == "!" and w.literal:
            return  # `! cmd`: the status negated, the command the same
        if len(cmd.words) == 0 and w.literal and self._next_is("()"):
            raise _Opaque("a function definition")
        cmd.words.append(w)

    def _next_is(self, token: str) -> bool:
        j = self.i
        while j < self.n and self.s[j] in _BLANK:
            j += 1
        return self.s.startswith(token, j)

    def _redirect(self) -> bool:
        s, j = self.s, self.i
        while j < self.n and s[j].isdigit():
            j += 1
        for op in ("<<-", "<<<", "<<", ">>", ">&", "<&", ">|", "<>", "&>", ">", "<"):
            if s.startswith(op, j):
                break
        else:
            return False
        if op in ("<<-", "<<"):
            raise _Opaque("a here-document")
        start = self.i
        self.i = j + len(op)
        self._blanks()
        if self.i >= self.n or s[self.i] in _OPERATOR_CHARS:
            raise _Opaque(f"a redirection '{op}' with no target")
        target = self._word()
        cmd = self._open(start)
        cmd.redirects.append((s[start:j + len(op)], target))
        cmd.end = self.i
        return True

    # --- words --------------------------------------------------------------------------------
    def _word(self) -> Word:
        s = self.s
        start = self.i
        text: list[str] = []
        literal, glob = True, False
        if s[self.i] == "~":
            literal = False
        while self.i < self.n:
            c = s[self.i]
            if c in _BLANK or c in _OPERATOR_CHARS:
                break
            if c == "\\":
                if self.i + 1 < self.n:
                    if s[self.i + 1] != "\n":
                        text.append(s[self.i + 1])
                    self.i += 2
                else:
                    self.i += 1
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise _Opaque("an unterminated single quote")
                text.append(s[self.i + 1:end])
                self.i = end + 1
            elif c == '"':
                lit = self._double(text)
                literal = literal and lit
            elif c == "$" or c == "`":
                text.append(self._expansion())
                literal = False
            else:
                if c in "*?[":
                    glob = True
                text.append(c)
                self.i += 1
        return Word("".join(text), s[start:self.i], literal, glob)

    def _double(self, text: list[str]) -> bool:
        """A double-quoted part (from its opening quote); False when it expands something."""
        s = self.s
        self.i += 1
        literal = True
        while True:
            if self.i >= self.n:
                raise _Opaque("an unterminated double quote")
            c = s[self.i]
            if c == '"':
                self.i += 1
                return literal
            if c == "\\" and self.i + 1 < self.n and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    text.append(s[self.i + 1])
                self.i += 2
            elif c == "$" or c == "`":
                text.append(self._expansion())
                literal = False
            else:
                text.append(c)
                self.i += 1

    def _expansion(self) -> str:
        """``$name``, ``${...}``, ``$(...)``, ``$((...))``, ``$'...'``, ``$?`` or backquotes, as written."""
        s, start = self.s, self.i
        if s[self.i] == "`":
            end = self.i + 1
            while end < self.n and s[end] != "`":
                end += 2 if s[end] == "\\" else 1
            if end >= self.n:
                raise _Opaque("an unterminated backquote")
            self.i = end + 1
            return s[start:self.i]
        nxt = s[self.i + 1] if self.i + 1 < self.n else ""
        if nxt in "({":
            close = ")" if nxt == "(" else "}"
            depth, j = 0, self.i + 1
            while j < self.n:
                ch = s[j]
                if ch == "\\":
                    j += 2
                    continue
                if ch == "'":
                    k = s.find("'", j + 1)
                    if k < 0:
                        break
                    j = k + 1
                    continue
                if ch == nxt:
                    depth += 1
                elif ch == close:
                    depth -= 1
                    if depth == 0:
                        self.i = j + 1
                        return s[start:self.i]
                j += 1
            raise _Opaque("an unterminated $" + nxt)
        if nxt == "'":
            end = self.i + 2
            while end < self.n and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            if end >= self.n:
                raise _Opaque("an unterminated $'...'")
            self.i = end + 1
            return s[start:self.i]
        j = self.i + 1
        if j < self.n and (s[j].isalnum() or s[j] == "_"):
            if s[j].isdigit():
                j += 1
            else:
                while j < self.n and (s[j].isalnum() or s[j] == "_"):
                    j += 1
        elif j < self.n and s[j] in "?$!#*@-":
            j += 1
        else:
            self.i += 1  # a lone $ is itself
            return "$"
        self.i = j
        return s[start:j]


def _is_assignment(raw: str) -> bool:
    name, eq, _ = raw.partition("=")
    return bool(eq) and bool(name) and (name[0].isalpha() or name[0] == "_") and all(
        ch.isalnum() or ch == "_" for ch in name)


def quote(text: str) -> str:
    """``text`` as one single-quoted shell word (POSIX: a quote is written ``'\\''``)."""
    return "'" + text.replace("'", "'\\''") + "'"
