"""Small statistics for reports: Wilson intervals, McNemar's test, a paired bootstrap.

Pure standard library (``math``, ``random``); deterministic given a seed.

* Wilson score interval for a binomial proportion (Wilson 1927; the interval Agresti & Coull 1998
  recommend over the normal "Wald" one for small n and proportions near 0 or 1).
* McNemar's test for two agents on the same tasks, from the discordant pairs only: ``b`` tasks
  only agent A solved, ``c`` only agent B solved. The exact version is a two-sided binomial test of
  ``min(b, c)`` against Binomial(b + c, 1/2); the mid-p version subtracts half the probability of
  the observed value from each tail, ``p_mid = p_exact - P(X = min(b, c))``, which Fagerland,
  Lydersen & Laake (BMC Med Res Methodol 2013, "The McNemar test for binary matched-pairs data")
  recommend as less conservative while keeping the nominal level in practice.
* A paired bootstrap of the difference in success rate: tasks are resampled with replacement (both
  agents' outcomes on a task stay together), percentile 95% interval.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Sequence

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval ``(low, high)`` for ``successes`` out of ``n`` (None when n == 0)."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..{n}, got {successes}")
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # at k = 0 (k = n) the low (high) end is exactly 0 (1); floating point leaves a tiny excursion
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _binom_pmf(k: int, n: int) -> float:
    return math.comb(n, k) / (2 ** n)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` and ``c``."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(_binom_pmf(i, n) for i in range(k + 1))
    return min(1.0, 2.0 * tail)


def mcnemar_midp(b: int, c: int) -> float:
    """Two-sided mid-p McNemar p-value: the exact p-value minus P(X = min(b, c))."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    return min(1.0, mcnemar_exact(b, c) - _binom_pmf(k, n)) if 2 * k != n else 1.0


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                     level: float = 0.95) -> dict[str, float]:
    """Bootstrap the mean difference ``mean(a) - mean(b)`` over paired items.

    Returns ``diff`` (observed), ``low``/``high`` (percentile interval at ``level``) and ``p`` (a
    two-sided bootstrap p-value: twice the smaller share of resampled differences on either side of
    zero, capped at 1)."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    n = len(a)
    if n == 0:
        return {"diff": float("nan"), "low": float("nan"), "high": float("nan"), "p": 1.0, "resamples": 0}
    d = [float(x) - float(y) for x, y in zip(a, b)]
    observed = sum(d) / n
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += d[rng.randrange(n)]
        stats.append(s / n)
    stats.sort()
    lo_i = int(math.floor((1 - level) / 2 * resamples))
    hi_i = min(resamples - 1, int(math.ceil((1 + level) / 2 * resamples)) - 1)
    below = sum(1 for s in stats if s <= 0) / resamples
    above = sum(1 for s in stats if s >= 0) / resamples
    return {"diff": observed, "low": stats[lo_i], "high": stats[hi_i], "p": min(1.0, 2 * min(below, above)),
            "resamples": resamples}


@dataclass
class PairedComparison:
    n: int            # tasks both agents were scored on
    both: int         # both succeeded
    only_a: int       # b: A succeeded, B failed
    only_b: int       # c: B succeeded, A failed
    neither: int
    sr_a: float
    sr_b: float
    p_exact: float
    p_midp: float
    boot_low: float
    boot_high: float
    boot_p: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare_paired(a: Sequence[bool], b: Sequence[bool], *, resamples: int = 2000, seed: int = 0) -> PairedComparison:
    """McNemar (exact and mid-p) and a paired bootstrap for two agents' outcomes on the same tasks."""
    if len(a) != len(b):
        raise ValueError("paired outcomes must have the same length")
    both = sum(1 for x, y in zip(a, b) if x and y)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    n = len(a)
    boot = paired_bootstrap([float(x) for x in a], [float(y) for y in b], resamples=resamples, seed=seed)
    return PairedComparison(
        n=n, both=both, only_a=only_a, only_b=only_b, neither=n - both - only_a - only_b,
        sr_a=(both + only_a) / n if n else float("nan"), sr_b=(both + only_b) / n if n else float("nan"),
        p_exact=mcnemar_exact(only_a, only_b), p_midp=mcnemar_midp(only_a, only_b),
        boot_low=boot["low"], boot_high=boot["high"], boot_p=boot["p"])


def cohen_kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    """Cohen's kappa of two binary raters from their 2x2 table (None when undefined)."""
    n = tp + fp + fn + tn
    if n == 0:
        return None
    po = (tp + tn) / n
    pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1 - pe)
