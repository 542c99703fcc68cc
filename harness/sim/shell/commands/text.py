"""Toybox text tools: head, tail, wc, grep, sort, uniq, tee, tr."""

from __future__ import annotations

import re

from harness.sim.shell.context import CommandError, Ctx, split_flags, to_int
from harness.sim.shell.table import command


def _bre_to_re(p: str) -> str:
    """POSIX basic regex to Python: ``\\( \\) \\| \\{ \\} \\+ \\?`` are the operators, bare ones literal."""
    out = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p):
            nxt = p[i + 1]
            out.append(nxt if nxt in "(){}|+?" else "\\" + nxt)
            i += 2
            continue
        out.append("\\" + ch if ch in "(){}|+?" else ch)
        i += 1
    return "".join(out)


_TR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_TR_CLASSES = {"alnum": str.isalnum, "alpha": str.isalpha, "digit": str.isdigit, "lower": str.islower,
               "upper": str.isupper, "space": str.isspace, "blank": lambda c: c in " \t",
               "punct": lambda c: c.isascii() and c.isprintable() and not c.isalnum() and c != " ",
               "cntrl": lambda c: ord(c) < 32 or ord(c) == 127, "print": lambda c: c.isascii() and c.isprintable(),
               "xdigit": lambda c: c in "0123456789abcdefABCDEF"}


def _tr_tokens(spec: str) -> list[tuple[str, bool]]:
    """A tr set's characters with POSIX escapes resolved (``\\n \\t \\\\ \\NNN``...), each with
    whether it was written literally (an escaped ``-`` is never a range)."""
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(spec):
        c = spec[i]
        if c == "\\" and i + 1 < len(spec):
            nxt = spec[i + 1]
            m = re.match(r"[0-7]{1,3}", spec[i + 1:])
            if m:
                out.append((chr(int(m.group(), 8)), False))
                i += 1 + len(m.group())
            else:
                out.append((_TR_ESCAPES.get(nxt, nxt), False))
                i += 2
            continue
        out.append((c, True))
        i += 1
    return out


def _tr_set(spec: str) -> str:
    """A tr SET as toybox/POSIX tr reads it: escapes, ``a-z`` ranges and ``[:class:]`` (ASCII)."""
    out: list[str] = []
    for name in _TR_CLASSES:  # argv cannot hold NUL, so it marks where a class was written
        spec = spec.replace(f"[:{name}:]", "\x00" + name + "\x00")
    toks = _tr_tokens(spec)
    i = 0
    while i < len(toks):
        c, literal = toks[i]
        if (c, literal) == ("\x00", True):
            j = next(k for k in range(i + 1, len(toks)) if toks[k] == ("\x00", True))
            name = "".join(t for t, _ in toks[i + 1:j])
            out.extend(ch for ch in map(chr, range(128)) if _TR_CLASSES[name](ch))
            i = j + 1
        elif i + 2 < len(toks) and toks[i + 1] == ("-", True):
            out.extend(chr(x) for x in range(ord(c), ord(toks[i + 2][0]) + 1))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _input_text(c: Ctx, paths: list[str]) -> list[tuple[str, bytes]]:
    """(name, content) of what a text tool reads: its files (``-`` is stdin), or stdin without any."""
    if not paths:
        return [("", c.stdin.read())]
    items = []
    for p in paths:
        data = c.shell.phone.fs.read(c.path(p)) if p != "-" else c.stdin.read()
        if data is None:
            raise CommandError(f"{c.argv[0]}: {p}: No such file or directory")
        items.append((p, data))
    return items


def _head_tail(c: Ctx, head: bool) -> int:
    args = list(c.argv[1:])
    n, nbytes, from_start = 10, None, False
    rest = []
    while args:
        a = args.pop(0)
        if a in ("-n", "-c") and args:
            v = args.pop(0)
            if a == "-c":
                nbytes = to_int(v)
            else:
                from_start = v.startswith("+")
                n = to_int(v)
        elif re.fullmatch(r"-n[+-]?\d+", a):
            from_start = a[2:].startswith("+")
            n = to_int(a[2:])
        elif re.fullmatch(r"-\d+", a):
            n = to_int(a[1:])
        elif a.startswith("-") and a != "-":
            continue
        else:
            rest.append(a)
    for _, data in _input_text(c, rest):
        if nbytes is not None:
            c.write(data[:nbytes] if head else data[-nbytes:] if nbytes else b"")
            continue
        lines = data.splitlines(keepends=True)
        if head:
            chosen = lines[:n] if n >= 0 else lines[:n]
        elif from_start:
            chosen = lines[max(n - 1, 0):]
        else:
            chosen = lines[-n:] if n else []
        c.write(b"".join(chosen))
    return 0


@command("head")
def head(c: Ctx) -> int:
    return _head_tail(c, head=True)


@command("tail")
def tail(c: Ctx) -> int:
    return _head_tail(c, head=False)


@command("wc")
def wc(c: Ctx) -> int:
    flags, paths = split_flags(c.argv[1:])
    show = [k for k in "lwc" if k in flags] or ["l", "w", "c"]
    for name, data in _input_text(c, paths):
        counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data)}
        vals = [str(counts[k]) for k in show]
        text = " ".join(vals) if len(vals) == 1 else " ".join(v.rjust(7) for v in vals)
        c.line(f"{text} {name}".rstrip())
    return 0


@command("grep")
def grep(c: Ctx) -> int:
    args = list(c.argv[1:])
    flags: set[str] = set()
    patterns: list[str] = []
    rest: list[str] = []
    while args:
        a = args.pop(0)
        if a == "--":
            rest.extend(args)
            break
        if a == "-e" and args:
            patterns.append(args.pop(0))
        elif a.startswith("-") and len(a) > 1 and not rest and not a[1:].isdigit():
            flags.update(a[1:])
        else:
            rest.append(a)
    if not patterns:
        if not rest:
            raise CommandError("grep: no pattern", 2)
        patterns.append(rest.pop(0))
    if "F" in flags:
        regex = "|".join(re.escape(p) for p in patterns)
    elif "E" in flags:
        regex = "|".join(f"(?:{p})" for p in patterns)
    else:
        regex = "|".join(f"(?:{_bre_to_re(p)})" for p in patterns)
    if "w" in flags:
        regex = rf"\b(?:{regex})\b"
    if "x" in flags:
        regex = rf"^(?:{regex})$"
    try:
        rx = re.compile(regex, re.IGNORECASE if "i" in flags else 0)
    except re.error as e:
        raise CommandError(f"grep: bad regex '{patterns[0]}': {e}", 2) from None
    sources = _input_text(c, rest)
    many = len(sources) > 1
    found = False
    for name, data in sources:
        count = 0
        for k, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            hit = bool(rx.search(raw))
            if hit == ("v" in flags):
                continue
            found = True
            count += 1
            if "q" in flags or "c" in flags or "l" in flags:
                continue
            prefix = (f"{name}:" if many else "") + (f"{k}:" if "n" in flags else "")
            if "o" in flags and "v" not in flags:
                for m in rx.finditer(raw):
                    c.line(prefix + m.group(0))
            else:
                c.line(prefix + raw)
        if "c" in flags:
            c.line((f"{name}:" if many else "") + str(count))
        if "l" in flags and count:
            c.line(name or "(standard input)")
    return 0 if found else 1


@command("sort")
def sort(c: Ctx) -> int:
    flags, paths = split_flags(c.argv[1:])
    lines: list[str] = []
    for _, data in _input_text(c, paths):
        lines.extend(data.decode("utf-8", "replace").splitlines())
    if "n" in flags:
        def key(s: str) -> float:
            m = re.match(r"\s*-?\d+(\.\d+)?", s)
            return float(m.group(0)) if m else 0.0
        lines.sort(key=key)
    else:
        lines.sort()
    if "r" in flags:
        lines.reverse()
    if "u" in flags:
        lines = list(dict.fromkeys(lines))
    c.write("".join(x + "\n" for x in lines))
    return 0


@command("uniq")
def uniq(c: Ctx) -> int:
    _, paths = split_flags(c.argv[1:])
    prev = None
    for _, data in _input_text(c, paths):
        for line in data.decode("utf-8", "replace").splitlines():
            if line != prev:
                c.line(line)
            prev = line
    return 0


@command("tee")
def tee(c: Ctx) -> int:
    phone = c.shell.phone
    flags, paths = split_flags(c.argv[1:])
    data = c.stdin.read()
    for p in paths:
        if c.writable("tee", p):
            full = c.path(p)
            old = (phone.fs.read(full) or b"") if "a" in flags else b""
            phone.fs.write(full, old + data)
    c.write(data)
    return 0


@command("tr")
def tr(c: Ctx) -> int:
    flags, sets = split_flags(c.argv[1:])
    data = c.stdin.read().decode("utf-8", "replace")
    if "d" in flags and sets:
        data = "".join(ch for ch in data if ch not in _tr_set(sets[0]))
    elif len(sets) >= 2:
        a, b = _tr_set(sets[0]), _tr_set(sets[1])
        b = b + b[-1:] * (len(a) - len(b))
        data = data.translate(str.maketrans(a, b[: len(a)]))
    c.write(data)
    return 0
