"""Real model outputs gathered from public repositories and issue threads for the families the shared
corpus does not hold (fixtures/world_outputs.jsonl: each line names its source, its licence and the
model that wrote it), each read by its family's parser and by ``harness agents parse`` to the action
its source shows, or refused with the reason."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import agents  # noqa: F401  (registers the parsers)
from agents.parsing import PARSERS, read_reply

ROWS = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "world_outputs.jsonl").read_text("utf-8").splitlines()
        if line.strip()]


def test_every_row_names_its_source_licence_and_model() -> None:
    assert len({r["id"] for r in ROWS}) == len(ROWS) >= 6
    for r in ROWS:
        assert r["source"].startswith("https://github.com/") and r["license"] and r["model"], r["id"]
        assert ("expect" in r) != ("error" in r), r["id"]
        assert r["family"] in PARSERS, r["id"]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_each_real_output_reads_as_its_source_shows(row: dict[str, Any]) -> None:
    parsed, error = read_reply(lambda t: PARSERS[row["family"]].parse(t, tuple(row["size"])), row["text"])
    if "error" in row:
        assert parsed is None and row["error"] in str(error)
    else:
        assert parsed is not None, error
        assert [a.to_json() for a in parsed.actions] == row["expect"]


def test_harness_agents_parse_reads_each_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file's own lines (objects with a "text" field), one run per family and screen size."""
    from harness.cli.main import main

    groups: dict[tuple[str, tuple[int, int]], list[dict[str, Any]]] = defaultdict(list)
    for r in ROWS:
        groups[(r["family"], tuple(r["size"]))].append(r)
    for (family, size), rows in groups.items():
        path = tmp_path / f"{family}-{size[0]}x{size[1]}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        assert main(["agents", "parse", "--agent", family, "--size", f"{size[0]}x{size[1]}", str(path)]) == 0
        out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert len(out) == len(rows)
        for r, o in zip(rows, out):
            if "error" in r:
                assert r["error"] in o["error"], (r["id"], o)
            else:
                assert (o if isinstance(o, list) else [o]) == r["expect"], (r["id"], o)
