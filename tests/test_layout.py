"""The house's shape, read from its own imports: harness/ holds packages only, each package in one
layer; no import circle, no arrow from a lower layer to a higher one, no module over 700 lines, a
runner that knows the live view and the operator only by their protocols (harness.core.episode),
and no module that takes another package's private names.

Every import counts, also one inside a function (a lazy import is still a dependency) and one
under ``if TYPE_CHECKING:`` (a type hint ties two modules as an import does: a circle of type-only
imports is still a circle). ``from pkg import mod`` depends on ``pkg.mod``, not on the package's
``__init__``. A new package must be given its layer in LAYERS (the test says which one is
missing), so the map stays true; docs/architecture.md says the same in words.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "agents", "judges")
MAX_LINES = 700

# Lowest first, one line per package (docs/architecture.md names each). A module may import modules
# of its own layer or below. Prefixes match a module and everything under it ("harness" only
# itself); the longest matching prefix decides.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("data", ("harness", "harness.core", "harness.records")),
    ("devices, phone, models, formats", ("harness.device", "harness.sim", "harness.client", "harness.importers")),
    ("agents and judges", ("agents", "judges")),
    ("runner", ("harness.run", "harness.farm", "harness.guard", "harness.preflight")),
    ("commands", ("harness.offline_judge", "harness.report", "harness.live", "harness.recorder")),
    ("cli", ("harness.cli", "harness.__main__")),
]
# Pairs that must never import each other, whatever their layers: agents and judges are plugins
# that know only the harness's data; the host's device code and the simulated phone meet only over ADB.
APART = [("agents", "judges"), ("harness.device", "harness.sim")]


# The runner reaches the live view and the operator through harness.core.episode's protocols only:
# nothing harness.live holds is imported by it, directly or through another module.
RUNNER = ("harness.run", "harness.farm", "harness.guard")
LIVE = "harness.live"


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = p
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets.update(f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names)
    out = set()
    for t in targets:
        while t and t not in mods:
            t = t.rpartition(".")[0]
        if t and t != name:
            out.add(t)
    return out


@functools.cache
def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def _layer(name: str) -> int | None:
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if name == p or (p != "harness" and name.startswith(p + ".")):
                if best is None or len(p) > best[0]:
                    best = (len(p), i)
    return best[1] if best else None


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_module_has_a_layer():
    """Every module has its layer; and harness/ is its packages, each named in LAYERS, and nothing
    else but __init__.py and __main__.py: a new part lands in the package of its layer, not as one
    more loose module."""
    missing = sorted(m for m in _graph() if _layer(m) is None)
    assert not missing, f"give these modules a layer in tests/test_layout.py LAYERS: {missing}"
    loose = sorted(p.name for p in (ROOT / "harness").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"loose modules in harness/ (put each in the package of its layer): {loose}"
    named = {prefix for _, prefixes in LAYERS for prefix in prefixes}
    unnamed = sorted(f"harness.{p.name}" for p in (ROOT / "harness").iterdir()
                     if (p / "__init__.py").is_file() and f"harness.{p.name}" not in named)
    assert not unnamed, f"give these packages a layer in tests/test_layout.py LAYERS: {unnamed}"


def test_no_import_circle():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_no_arrow_up_and_plugins_apart():
    bad = []
    for m, deps in sorted(_graph().items()):
        lm = _layer(m)
        for d in sorted(deps):
            ld = _layer(d)
            if lm is not None and ld is not None and ld > lm:
                bad.append(f"{m} ({LAYERS[lm][0]}) imports {d} ({LAYERS[ld][0]})")
            for a, b in APART:
                if (_under(m, a) and _under(d, b)) or (_under(m, b) and _under(d, a)):
                    bad.append(f"{m} imports {d}: {a} and {b} stay apart")
    assert not bad, "\n".join(bad)


def test_no_module_over_the_limit():
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in _modules().items()}
    big = sorted((n, m) for m, n in sizes.items() if n > MAX_LINES)
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_the_runner_imports_nothing_from_the_live_view():
    graph = _graph()
    bad = []
    for m in sorted(graph):
        if not any(_under(m, r) for r in RUNNER):
            continue
        seen, todo, via = {m}, [m], {m: None}
        while todo:
            v = todo.pop()
            for w in graph[v]:
                if w not in seen:
                    seen.add(w)
                    via[w] = v
                    todo.append(w)
        for hit in sorted(w for w in seen if _under(w, LIVE)):
            chain = [hit]
            while via[chain[-1]] is not None:
                chain.append(via[chain[-1]])
            bad.append(" -> ".join(reversed(chain)))
    assert not bad, "the runner imports harness.live (give it a protocol in harness.core.episode):\n" + "\n".join(bad)


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def test_no_private_names_taken_across_packages():
    """``from harness.report.viewer import _overlay`` in harness.live would tie the live page to the
    viewer's insides: a name two packages share is public (harness.report.page_parts)."""
    mods = _modules()
    bad = []
    for name, path in sorted(mods.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module or node.module not in mods:
                continue
            if _package(node.module, mods[node.module]) == _package(name, path):
                continue
            bad += [f"{name} imports {node.module}.{a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "private names used from another package (make them public where they are shared):\n" + \
        "\n".join(bad)
