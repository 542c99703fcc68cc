"""The house's shape, read from its own imports: no import circle, no arrow from a lower layer to a
higher one, no module over 900 lines, a runner that knows the live view and the operator only by
their protocols (harness.episode), and no module that takes another package's private names.

Every import counts, also one inside a function (a lazy import is still a dependency); only
imports under ``if TYPE_CHECKING:`` are left out. ``from pkg import mod`` depends on ``pkg.mod``,
not on the package's ``__init__``. A new module must be given its layer in LAYERS (the test says
which one is missing), so the map stays true.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "agents", "judges")
MAX_LINES = 900

# Lowest first. A module may import modules of its own layer or below. Prefixes match a module and
# everything under it ("harness" only itself); the longest matching prefix decides.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("data", ("harness", "harness.actions", "harness.usage", "harness.registry", "harness.state_checks",
              "harness.tasks", "harness.screenshot", "harness.resample", "harness.episode", "harness.hierarchy",
              "harness.records", "harness.run_tasks",
              "harness.verdicts", "harness.input_codes", "harness.user_error", "harness.ports",
              "harness.profile_folder", "harness.daemon_pool", "harness.secret_text")),
    ("devices, phone, models, formats", ("harness.device", "harness.sim", "harness.model", "harness.model_transport",
                                         "harness.model_slots", "harness.model_keys", "harness.replies",
                                         "harness.importers")),
    ("agents and judges", ("agents", "judges")),
    ("runner", ("harness.runner", "harness.suite", "harness.static_run", "harness.farm")),
    ("commands", ("harness.run_command", "harness.run_operator", "harness.offline_judge", "harness.judge_command", "harness.calibrate_command",
                  "harness.task_checks", "harness.task_trials", "harness.report", "harness.demo", "harness.live",
                  "harness.recorder")),
    ("cli", ("harness.cli", "harness.__main__", "harness.record_command", "harness.devices_command")),
]
# Pairs that must never import each other, whatever their layers: agents and judges are plugins
# that know only the harness's data; the host's device code and the simulated phone meet only over ADB.
APART = [("agents", "judges"), ("harness.device", "harness.sim")]


# The runner reaches the live view and the operator through harness.episode's protocols only:
# nothing harness.live holds is imported by it, directly or through another module.
RUNNER = ("harness.runner", "harness.suite", "harness.static_run", "harness.farm")
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
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for b in node.body for n in ast.walk(b)}
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
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
    missing = sorted(m for m in _graph() if _layer(m) is None)
    assert not missing, f"give these modules a layer in tests/test_layout.py LAYERS: {missing}"


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
    big = sorted((n, m) for m, p in _modules().items()
                 if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
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
    assert not bad, "the runner imports harness.live (give it a protocol in harness.episode):\n" + "\n".join(bad)


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
