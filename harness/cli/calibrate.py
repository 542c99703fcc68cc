"""``harness judge-eval --calibrate crate-s --alpha A``: the monitor's threshold from labelled steps.

Reads the labelled steps' recorded scores (:mod:`judges.step_scores`), refuses scores of more than
one model, prompt or image policy, computes the split-conformal threshold
(:mod:`judges.calibration`) and writes ``calibration.json`` (the file ``--monitor-opt
calibration=FILE`` reads), ``calibration.png`` (miss rate and false alarms against the threshold)
and ``calibration.html`` beside it, then prints a one-screen summary (or the JSON). Nothing is
written when the calibration is refused.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.records import (atomic_write_bytes, atomic_write_json, build_environment_info, file_sha256, now_iso, redact,
                             to_jsonable)
from harness.core.user_error import UserError
from judges.agreement import AgreementError, labels_from_oracle, load_labels
from judges.calibration import (CALIBRATED_MONITORS, CalibrationError, alpha_fraction, calibration_document,
                                conformal_threshold, describe_scorer)
from judges.step_scores import StepScores, collect, prompts_by_language


def _left_out_text(scores: StepScores, kind: str) -> str:
    parts = [f"{c[kind]} {reason}" for reason, c in scores.left_out.items() if c.get(kind)]
    return "; ".join(parts)


def _one_scorer(scores: StepScores) -> tuple[dict[str, Any], dict[str, str]]:
    """The one model/image policy and the one step prompt per language the used scores came from."""
    used = {s.scorer for s in scores.steps}
    if len(used) > 1:
        lines = [f"{describe_scorer(scores.scorers[k]['scorer'])} (in {', '.join(sorted(scores.scorers[k]['sources']))})"
                 for k in sorted(used)]
        raise UserError("the scores come from more than one scorer, and one calibration holds one: "
                        + "; ".join(lines) + ". Narrow the sources with --judgements SET or --offline-only, "
                        "or give runs of one monitor")
    prompts = prompts_by_language(scores.steps)
    mixed = {lang: ids for lang, ids in prompts.items() if len(ids) > 1}
    if mixed:
        raise UserError("the scores come from more than one step prompt: " + "; ".join(
            f"{lang}: {', '.join(sorted(ids))}" for lang, ids in sorted(mixed.items()))
            + ". Calibrate on steps judged with one prompt version")
    if "unknown" in prompts:
        raise UserError(f"{len([s for s in scores.steps if not s.prompt])} scored step(s) do not name the prompt "
                        "that scored them; a calibration must say which prompt it holds for")
    return scores.scorers[next(iter(used))]["scorer"], {lang: next(iter(ids)) for lang, ids in prompts.items()}


def calibrate(runs: Sequence[str], monitor: str, alpha: str, *, labels_path: str | None, labels_from: str | None,
              judgement_sets: Sequence[str] | None, offline_only: bool, warnings: list[str],
              argv: Any = None) -> dict[str, Any]:
    """The calibration document of the runs' labelled steps; UserError when it cannot be made."""
    if monitor not in CALIBRATED_MONITORS:
        raise UserError(f"--calibrate: {monitor!r} cannot be calibrated (only {', '.join(CALIBRATED_MONITORS)}: "
                        "a monitor that records a 0-1 score per step)")
    try:
        alpha_fraction(alpha)
        labels = load_labels(labels_path) if labels_path else labels_from_oracle(runs)
        if not labels:
            raise UserError("no labels: the labels file is empty" if labels_path else "no oracle verdicts in these runs")
        scores = collect(runs, labels, monitor=monitor, judgement_sets=judgement_sets,
                         include_live=not offline_only, warnings=warnings)
    except (AgreementError, CalibrationError) as e:
        raise UserError(str(e)) from None
    if not scores.steps:
        why = "; ".join(f"{sum(c.values())} {reason}" for reason, c in scores.left_out.items()) or "no steps"
        raise UserError(f"no labelled step has a {monitor} score in these runs ({why})")
    scorer, prompts = _one_scorer(scores)
    risky = [s.score for s in scores.steps if s.risky]
    safe = [s.score for s in scores.steps if not s.risky]
    try:
        threshold = conformal_threshold(risky, alpha)
    except CalibrationError as e:
        lost = _left_out_text(scores, "risky")
        raise UserError(f"{e}" + (f" (labelled risky steps left out: {lost})" if lost else "")) from None
    label_info = ({"path": str(labels_path), "sha256": file_sha256(labels_path)} if labels_path
                  else {"from": labels_from, "runs": list(runs)})
    steps = {"used": len(scores.steps), "risky": len(risky), "safe": len(safe),
             "left_out": scores.left_out, "scored_twice": scores.scored_twice,
             "scored_twice_differently": scores.scored_twice_differently}
    doc = calibration_document(monitor=monitor, threshold=threshold, risky=risky, safe=safe, scorer=scorer,
                               prompts=prompts, labels=label_info, runs=scores.runs, steps=steps,
                               created_at=now_iso(), environment=build_environment_info(), command=argv)
    doc["notes"] = scores.notes
    return doc


def output_paths(out: str) -> tuple[Path, Path, Path]:
    p = Path(out)
    if p.suffix != ".json":
        raise UserError(f"--out {out}: the calibration file's name ends in .json (its plot and page go beside it)")
    return p, p.with_suffix(".png"), p.with_suffix(".html")


def write_outputs(doc: dict[str, Any], out: str) -> list[Path]:
    from harness.report.calibration import calibration_html, plot_png

    json_path, png_path, html_path = output_paths(out)
    png = plot_png(doc["scores"]["risky"], doc["scores"]["safe"], doc["threshold"], doc["alpha"],
                   f"{doc['monitor']} calibration: {doc['n_risky']} risky and {doc['n_safe']} safe steps, "
                   f"model {doc['scorer'].get('model')}")
    try:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(json_path, redact(to_jsonable(doc)))  # as every record: no secret by any name
        atomic_write_bytes(png_path, png)
        atomic_write_bytes(html_path, calibration_html(doc, png).encode("utf-8"))
    except OSError as e:
        raise UserError(f"{e.filename or json_path}: cannot write the calibration: {e.strerror or e}") from None
    return [json_path, png_path, html_path]


def print_summary(doc: dict[str, Any], written: list[Path], warnings: list[str], file: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from harness.report.calibration import curve_rows, left_out_rows, summary_lines

    console = Console(file=file or sys.stdout, width=140)
    for line in summary_lines(doc):
        console.print(escape(line), highlight=False)
    table = Table(title="miss rate and false alarms by threshold")
    for col in ("threshold", "miss rate", "false alarms"):
        table.add_column(col, justify="right")
    for row in curve_rows(doc):
        table.add_row(*row)
    console.print(table)
    for counts, why in left_out_rows(doc):
        console.print(escape(f"left out: {counts} step(s): {why}"), highlight=False)
    st = doc["steps"]
    if st["scored_twice"]:
        console.print(f"{st['scored_twice']} step(s) scored by more than one source: the first was used "
                      f"({st['scored_twice_differently']} with another score)", highlight=False)
    labels = doc["labels"]
    console.print(escape("labels: " + (f"{labels['path']} (sha256 {labels['sha256'][:16]}...)" if "path" in labels
                                       else f"the {labels['from']}'s verdicts")), highlight=False)
    console.print(escape("runs: " + "; ".join(
        f"{r['run']} ({r['episodes']} episode(s), scores used: "
        + (", ".join(f"{k} {v}" for k, v in r["used"].items()) or "none") + ")" for r in doc["runs"])), highlight=False)
    for note in [*doc.get("notes", []), *warnings]:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    console.print(escape("wrote " + ", ".join(str(p) for p in written)), highlight=False)


def run_calibrate(args: Any, argv: Any = None) -> int:
    """``harness judge-eval --calibrate``: calibrate, write the files, print the summary."""
    if args.alpha is None:
        raise UserError("--calibrate needs --alpha A (the largest fraction of risky steps allowed to pass)")
    if bool(args.labels) == bool(args.labels_from):
        raise UserError("give either --labels FILE or --labels-from oracle")
    out = args.out or "calibration.json"
    output_paths(out)
    warnings: list[str] = []
    doc = calibrate(args.runs, args.calibrate, args.alpha, labels_path=args.labels, labels_from=args.labels_from,
                    judgement_sets=args.judgements, offline_only=args.offline_only, warnings=warnings, argv=argv)
    written = write_outputs(doc, out)
    if args.format == "json":
        print(json.dumps({**doc, "written": [str(p) for p in written], "warnings": warnings}, indent=1,
                         ensure_ascii=False))
    else:
        print_summary(doc, written, warnings)
    return 0
