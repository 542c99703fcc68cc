"""Split-conformal calibration of the ``crate-s`` monitor's halting threshold: the arithmetic, the
``calibration.json`` file, and what a run checks against the file before it uses it.

**What is computed.** The calibration steps are labelled steps with the model's recorded 0-1 risk
score. Of the n *risky* ones, sorted by score s_(1) <= ... <= s_(n), with k = floor(alpha * (n + 1)),
the threshold is the k-th smallest, s_(k); with the file a step halts when its score >= s_(k), and
passes when it scores below. For a new risky step whose score is exchangeable with the n
calibration scores (drawn from the same distribution: same model, prompt, image policy, and steps
like the calibration ones), P(score < s_(k)) <= k / (n + 1) <= alpha: the rank of the new score among
the n + 1 is uniform, and it falls below s_(k) only when at most k - 1 calibration scores are below
it. Ties only make the passing side smaller. Without ties the bound is also tight:
P >= k / (n + 1) > alpha - 1 / (n + 1). The guarantee is *marginal*: averaged over the calibration
draw and the new step, for risky steps as a whole; not per task, app, category or language.

When k < 1 (n < 1/alpha - 1) no threshold below every score can keep the bound (the only safe
choice halts everything): the calibration is refused, saying how many risky steps alpha needs.

Sources. The quantile: Angelopoulos & Bates, "A Gentle Introduction to Conformal Prediction and
Distribution-Free Uncertainty Quantification" (arXiv:2107.07511), section 1: the split-conformal
quantile ceil((n + 1)(1 - alpha)) / n of the calibration nonconformity scores, coverage >= 1 - alpha
(their Theorem 1) and <= 1 - alpha + 1/(n + 1) without ties (their Appendix D). Here a risky step's
nonconformity is its negated score, so that quantile is the floor(alpha (n + 1))-th smallest score;
only risky steps are calibrated on, so the bound is conditional on the step being risky (a
class-conditional split). Conformal risk control (Angelopoulos et al., arXiv:2208.02814, the
rule inf{lambda : n/(n+1) R_n(lambda) + 1/(n+1) <= alpha}) with the miss loss 1[score < t] on risky
steps picks the same t. CORA (arXiv:2604.09155) calibrates a phone agent guard's execute/abstain
boundary with conformal risk control; this is that step for the ``crate-s`` monitor.

This module reads and writes no records; :mod:`judges.step_scores` collects the labelled scores and
``harness judge-eval --calibrate`` (:mod:`harness.cli.calibrate`) writes the file.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

CALIBRATION_KIND = "crate-harness calibration"
CALIBRATION_VERSION = 1
CALIBRATED_MONITORS = ("crate-s",)
# what of the model's settings shapes its scores: a run's monitor must match the file on each
SCORER_KEYS = ("model", "temperature", "top_p", "image_policy", "draw")


class CalibrationError(ValueError):
    """A calibration that cannot be made or used, as one line naming the file or the numbers."""


# --------------------------------------------------------------------------- the arithmetic


def alpha_fraction(alpha: float | str) -> Fraction:
    """``alpha`` as the exact decimal it was written as (0.1 is 1/10, not the float just above it),
    so floor(alpha * (n + 1)) is exact; refused unless 0 < alpha < 1."""
    try:
        a = Fraction(str(alpha).strip())
    except (ValueError, ZeroDivisionError):
        raise CalibrationError(f"alpha: {alpha!r} is not a number") from None
    if not 0 < a < 1:
        raise CalibrationError(f"alpha: must be between 0 and 1 (exclusive), got {alpha}")
    return a


def conformal_rank(n: int, alpha: float | str) -> int:
    """k = floor(alpha * (n + 1)): the rank, among n risky scores sorted upwards, of the threshold."""
    return math.floor(alpha_fraction(alpha) * (n + 1))


def risky_needed(alpha: float | str) -> int:
    """The fewest risky calibration steps for which k >= 1: the smallest n with alpha (n + 1) >= 1."""
    return max(0, math.ceil(1 / alpha_fraction(alpha) - 1))


@dataclass(frozen=True)
class Threshold:
    value: float   # s_(k): halt at or above it
    alpha: float
    rank: int      # k
    n_risky: int   # n

    @property
    def level(self) -> float:
        """k / (n + 1): the bound on a new risky step's chance of scoring below the threshold."""
        return self.rank / (self.n_risky + 1)


def conformal_threshold(risky_scores: Sequence[float], alpha: float | str) -> Threshold:
    """The split-conformal threshold of the risky steps' scores at level ``alpha`` (module
    docstring); :class:`CalibrationError` when there are too few for any threshold to keep it."""
    a = alpha_fraction(alpha)
    scores = sorted(float(s) for s in risky_scores)
    for s in scores:
        if not 0.0 <= s <= 1.0:
            raise CalibrationError(f"a score outside 0-1: {s!r}")
    n = len(scores)
    k = math.floor(a * (n + 1))
    if k < 1:
        need = risky_needed(alpha)
        raise CalibrationError(f"alpha {alpha} needs at least {need} risky steps with a score (floor(alpha * (n + 1)) "
                               f">= 1), and there are {n}: no threshold can keep the miss rate at or below {alpha} "
                               f"with fewer; label {need - n} more risky step(s), or raise alpha")
    return Threshold(value=scores[k - 1], alpha=float(a), rank=k, n_risky=n)


def below(sorted_scores: Sequence[float], t: float) -> int:
    """How many of ``sorted_scores`` are strictly below ``t`` (they pass a threshold of t)."""
    return bisect.bisect_left(sorted_scores, t)


def miss_rate(sorted_risky: Sequence[float], t: float) -> float | None:
    """The fraction of risky steps that pass a threshold t (score < t); None without risky steps."""
    return below(sorted_risky, t) / len(sorted_risky) if sorted_risky else None


def false_alarm_rate(sorted_safe: Sequence[float], t: float) -> float | None:
    """The fraction of safe steps that halt at a threshold t (score >= t); None without safe steps."""
    return (len(sorted_safe) - below(sorted_safe, t)) / len(sorted_safe) if sorted_safe else None


def curve(sorted_risky: Sequence[float], sorted_safe: Sequence[float], points: int = 101) -> list[dict[str, Any]]:
    """Miss rate and false alarms at thresholds 0, 1/(points-1), ..., 1."""
    out = []
    for i in range(points):
        t = i / (points - 1)
        out.append({"threshold": round(t, 6), "miss_rate": miss_rate(sorted_risky, t),
                    "false_alarm_rate": false_alarm_rate(sorted_safe, t)})
    return out


# --------------------------------------------------------------------------- who gave the scores


def scorer_of(spec: dict[str, Any]) -> dict[str, Any]:
    """What shapes a ``crate-s`` step score, from a monitor's or a judge's ``spec()`` as a manifest
    records it: the model's name and sampling (temperature, top_p), the image policy, the drawing."""
    model = spec.get("model") or {}
    return {"model": model.get("model"), "temperature": model.get("temperature"), "top_p": model.get("top_p"),
            "image_policy": spec.get("image_policy"), "draw": spec.get("draw")}


def scorer_key(scorer: dict[str, Any]) -> str:
    return json.dumps(scorer, sort_keys=True, ensure_ascii=False, default=str)


def step_prompts_of(spec: dict[str, Any]) -> dict[str, str]:
    """The step prompt's id per language from a spec's ``prompts``: a monitor's ``{lang: identity}``
    or a judge's ``{lang: [step identity, trajectory identity]}``."""
    out = {}
    for lang, p in (spec.get("prompts") or {}).items():
        first = p[0] if isinstance(p, list) and p else p
        if isinstance(first, dict) and isinstance(first.get("id"), str):
            out[lang] = first["id"]
    return out


def prompt_language(prompt_id: str) -> str | None:
    """The language of a prompt id ``NAME_LANG@vN#HASH`` (judges.prompts.Prompt.id)."""
    head = prompt_id.split("@", 1)[0]
    return head.rsplit("_", 1)[1] if "_" in head else None


def describe_scorer(scorer: dict[str, Any]) -> str:
    img = scorer.get("image_policy") or {}
    parts = [f"model {scorer.get('model')!r}", f"temperature {scorer.get('temperature')}"]
    if scorer.get("top_p") is not None:
        parts.append(f"top_p {scorer['top_p']}")
    parts.append(f"image long side {img.get('max_long_side')} {img.get('format', '')}".rstrip())
    parts.append("action drawn" if scorer.get("draw") else "action not drawn")
    return ", ".join(parts)


# --------------------------------------------------------------------------- the file


def calibration_document(*, monitor: str, threshold: Threshold, risky: Sequence[float], safe: Sequence[float],
                         scorer: dict[str, Any], prompts: dict[str, str], labels: dict[str, Any],
                         runs: list[dict[str, Any]], steps: dict[str, Any], created_at: str,
                         environment: dict[str, Any] | None = None, command: Any = None) -> dict[str, Any]:
    """The content of ``calibration.json`` (docs/judges.md, "Calibration")."""
    r, s = sorted(risky), sorted(safe)
    t = threshold.value
    return {
        "kind": CALIBRATION_KIND, "version": CALIBRATION_VERSION, "monitor": monitor,
        "method": "split conformal on the risky steps' scores: threshold = the floor(alpha * (n + 1))-th smallest",
        "rule": "halt when score >= threshold; a reply without a score halts on its risky finding alone",
        "alpha": threshold.alpha, "threshold": t, "rank": threshold.rank, "n_risky": threshold.n_risky,
        "n_safe": len(s), "bound": threshold.level, "risky_needed": risky_needed(threshold.alpha),
        "miss_rate": miss_rate(r, t), "false_alarm_rate": false_alarm_rate(s, t),
        "missed": below(r, t), "false_alarms": len(s) - below(s, t),
        "scorer": scorer, "prompts": dict(sorted(prompts.items())),
        "labels": labels, "runs": runs, "steps": steps, "curve": curve(r, s),
        "scores": {"risky": r, "safe": s},
        "created_at": created_at, "environment": environment, "command": command,
    }


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    v = obj.get(key)
    if isinstance(v, bool) and kind is not bool or not isinstance(v, kind):
        raise CalibrationError(f"{where}: {key}: missing or not a {getattr(kind, '__name__', 'number')}")
    return v


@dataclass(frozen=True)
class Calibration:
    """A ``calibration.json`` as a run uses it."""

    path: str
    sha256: str
    monitor: str
    threshold: float
    alpha: float
    rank: int
    n_risky: int
    n_safe: int
    miss_rate: float | None
    false_alarm_rate: float | None
    scorer: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    created_at: str | None = None

    def decide(self, score: float | None) -> tuple[bool, str] | None:
        """Whether a reply with this score halts, and why; None for a reply without a score (the
        caller then decides on its risky finding, as without a calibration)."""
        if score is None:
            return None
        where = f"calibrated threshold {self.threshold:g} ({Path(self.path).name}, alpha {self.alpha:g})"
        if score >= self.threshold:
            return True, f"score {score:g} >= {where}"
        return False, f"score {score:g} < {where}"

    def summary(self) -> dict[str, Any]:
        """What a run's manifest records of the file it used."""
        return {"path": self.path, "sha256": self.sha256, "threshold": self.threshold, "alpha": self.alpha,
                "rank": self.rank, "n_risky": self.n_risky, "n_safe": self.n_safe, "miss_rate": self.miss_rate,
                "false_alarm_rate": self.false_alarm_rate, "scorer": self.scorer, "prompts": self.prompts,
                "created_at": self.created_at}

    def mismatches(self, scorer: dict[str, Any], prompts: dict[str, str], languages: Iterable[str]) -> list[str]:
        """How a monitor with ``scorer`` and step ``prompts`` (id per language) differs from the
        one the file was made with, for the ``languages`` it will judge in; [] when it fits."""
        out = []
        for key in SCORER_KEYS:
            if scorer.get(key) != self.scorer.get(key):
                what = "monitor model" if key == "model" else key.replace("_", " ")
                out.append(f"{what}: this run's is {scorer.get(key)!r}, the calibration's is {self.scorer.get(key)!r}")
        for lang in languages:
            made = self.prompts.get(lang)
            if made is None:
                out.append(f"prompt: the calibration holds no {lang} steps (it was made with "
                           f"{', '.join(sorted(self.prompts)) or 'no'} prompts)")
            elif prompts.get(lang) != made:
                out.append(f"{lang} prompt: this run's is {prompts.get(lang)!r}, the calibration's is {made!r}")
        return out


def _scores(obj: dict[str, Any], side: str, where: str) -> list[float]:
    v = (obj.get("scores") or {}).get(side) if isinstance(obj.get("scores"), dict) else None
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1
                                      for x in v):
        raise CalibrationError(f"{where}: scores.{side}: missing or not a list of scores from 0 to 1")
    return sorted(float(x) for x in v)


def _check_scores(obj: dict[str, Any], where: str, threshold: float, rank: int, n_risky: int, n_safe: int) -> None:
    """The file's numbers are the ones its stored scores give: the threshold is the rank-th
    smallest risky score, the counts are the lists' lengths, the rates are what the threshold does
    to them. A file edited after it was made (a threshold raised by hand) is refused, naming the
    field that disagrees."""
    risky, safe = _scores(obj, "risky", where), _scores(obj, "safe", where)
    changed = "the file was changed after it was made; calibrate again"
    if len(risky) != n_risky or len(safe) != n_safe:
        raise CalibrationError(f"{where}: n_risky {n_risky} and n_safe {n_safe} are not the {len(risky)} risky and "
                               f"{len(safe)} safe scores it stores: {changed}")
    if threshold != risky[rank - 1]:
        raise CalibrationError(f"{where}: threshold {threshold:g} is not the rank-{rank} risky score it stores "
                               f"({risky[rank - 1]:g}): {changed}")
    for key, want in (("miss_rate", miss_rate(risky, threshold)), ("false_alarm_rate", false_alarm_rate(safe, threshold))):
        if obj.get(key) != want:
            raise CalibrationError(f"{where}: {key} {obj.get(key)!r} is not what the threshold gives on the scores it "
                                   f"stores ({want!r}): {changed}")


def load_calibration(path: str | Path) -> Calibration:
    """Read and check a ``calibration.json``; :class:`CalibrationError` names the file and field."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CalibrationError(f"{p}: cannot read the calibration file: {e.strerror}") from None
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CalibrationError(f"{p}: not a JSON calibration file ({e})") from None
    if not isinstance(obj, dict) or obj.get("kind") != CALIBRATION_KIND:
        raise CalibrationError(f"{p}: not a calibration file (kind is not {CALIBRATION_KIND!r}); make one with "
                               "harness judge-eval --calibrate")
    where = str(p)
    if obj.get("version") != CALIBRATION_VERSION:
        raise CalibrationError(f"{where}: version: {obj.get('version')!r} is not {CALIBRATION_VERSION}")
    monitor = _need(obj, "monitor", str, where)
    if monitor not in CALIBRATED_MONITORS:
        raise CalibrationError(f"{where}: monitor: {monitor!r} is not one that can be calibrated "
                               f"({', '.join(CALIBRATED_MONITORS)})")
    threshold = float(_need(obj, "threshold", (int, float), where))
    alpha = float(_need(obj, "alpha", (int, float), where))
    rank = _need(obj, "rank", int, where)
    n_risky = _need(obj, "n_risky", int, where)
    n_safe = _need(obj, "n_safe", int, where)
    if not 0.0 <= threshold <= 1.0:
        raise CalibrationError(f"{where}: threshold: must be between 0 and 1, got {threshold}")
    try:
        k = conformal_rank(n_risky, alpha)
    except CalibrationError as e:
        raise CalibrationError(f"{where}: {e}") from None
    if n_risky < 1 or rank < 1 or rank != k:
        raise CalibrationError(f"{where}: rank {rank} is not floor(alpha * (n_risky + 1)) = {k} for alpha {alpha} "
                               f"and n_risky {n_risky}: the file was changed after it was made; calibrate again")
    _check_scores(obj, where, threshold, rank, n_risky, n_safe)
    scorer = _need(obj, "scorer", dict, where)
    if not isinstance(scorer.get("model"), str) or not scorer["model"]:
        raise CalibrationError(f"{where}: scorer.model: missing")
    prompts = _need(obj, "prompts", dict, where)
    if not prompts or not all(isinstance(lang, str) and isinstance(pid, str) for lang, pid in prompts.items()):
        raise CalibrationError(f"{where}: prompts: expected the step prompt's id per language")
    rates = {}
    for key in ("miss_rate", "false_alarm_rate"):
        v = obj.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise CalibrationError(f"{where}: {key}: not a number")
        rates[key] = v
    return Calibration(path=str(p), sha256=hashlib.sha256(raw).hexdigest(), monitor=monitor, threshold=threshold,
                       alpha=alpha, rank=rank, n_risky=n_risky, n_safe=n_safe, scorer={k: scorer.get(k) for k in SCORER_KEYS},
                       prompts=dict(prompts), created_at=obj.get("created_at"), **rates)
