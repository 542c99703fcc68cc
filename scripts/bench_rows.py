"""The rows the bench scripts write (``{"name", "value", "target", "holds"}``, which
scripts/bench_all.py folds into bench/results.json), and the table they print."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def bench_dir() -> Path:
    """Where the bench scripts write their results: ``bench/`` in the repository, or the folder
    ``CRATE_BENCH_DIR`` names (``scripts/bench --quick`` gives one of its own, so a quick run, whose
    numbers measure nothing, never replaces measured results)."""
    d = Path(os.environ.get("CRATE_BENCH_DIR") or ROOT / "bench")
    d.mkdir(parents=True, exist_ok=True)
    return d


def row(name: str, value: Any, target: str | None = None) -> dict[str, Any]:
    """One result; ``target`` is ``"<= X"`` or ``">= X"``; ``holds`` is computed from it."""
    holds = None
    if target is not None:
        op, x = target.split()
        holds = isinstance(value, (int, float)) and (value <= float(x) if op == "<=" else value >= float(x))
    return {"name": name, "value": round(value, 4) if isinstance(value, float) else value, "target": target,
            "holds": holds}


def write_rows(path: Path, rows: list[dict[str, Any]], title: str) -> None:
    """``{"rows": rows}`` to ``path``, and the rows as a table under ``title``."""
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"rows": rows}, indent=1), encoding="utf-8")
    width = max(len(r["name"]) for r in rows)
    print(title)
    for r in rows:
        mark = "" if r["holds"] is None else ("  holds" if r["holds"] else "  MISSES")
        print(f"  {r['name']:<{width}}  {r['value']:>9}  {r['target'] or '':>7}{mark}")
