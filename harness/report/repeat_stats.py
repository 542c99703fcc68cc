"""Statistics of repeated episodes (``harness run --repeats N``): pure standard library, seeded.

* **pass@k**, the chance that at least one of k episodes drawn without replacement from a task's n
  repeats succeeds, by the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language
  Models Trained on Code", the Codex paper): ``1 - C(n - c, k) / C(n, k)`` with c successes.
* **pass^k**, the chance that all k drawn succeed, as tau-bench defines it (Yao et al. 2024,
  "tau-bench: A Benchmark for Tool-Agent-User Interaction"): ``C(c, k) / C(n, k)``.
  Both are per task, then averaged over the tasks with at least k repeats.
* A **two-level bootstrap** of the suite's success rate: tasks resampled with replacement, then
  each drawn task's repeats resampled with replacement (the rate of n draws from a task with c of
  n successes is Binomial(n, c/n) / n, drawn by inverting its distribution); percentile interval.
  Resampling tasks only would leave out how much a task moves between repeats, resampling repeats
  only how much the suite's choice of tasks moves the rate.
* A **paired sign-flip test** on per-task success rates (Fisher's randomisation test of the mean
  per-task difference: under the null each task's difference is as likely to have either sign);
  exact up to ``EXACT_FLIPS`` tasks with a difference, Monte Carlo beyond.
* The **minimum detectable difference** of a paired design at two-sided alpha 0.05 and 80% power,
  by the normal approximation: ``(z_0.975 + z_0.80) * sd(d) / sqrt(T)``, sd(d) the standard
  deviation of the T per-task differences (Cohen 1988, the paired case).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from typing import Callable, Sequence

from harness.report.stats import Z95

Z80 = 0.8416212335729143  # the 0.80 quantile of the standard normal
EXACT_FLIPS = 16          # 2^16 sign patterns enumerated at most


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased pass@k from n repeats with c successes (1 <= k <= n)."""
    _check(n, c, k)
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k: all k of k repeats drawn without replacement succeed."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


def mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n - 1); sd None below two values."""
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _sampler(n: int, c: int):
    """A draw of the success rate of n repeats resampled with replacement from c of n successes."""
    if c in (0, n):
        rate = c / n
        return lambda rng: rate
    p = c / n
    cdf = list(itertools.accumulate(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(n + 1)))
    return lambda rng: min(bisect.bisect_left(cdf, rng.random() * cdf[-1]), n) / n


def _percentile(stats: list[float], level: float) -> tuple[float, float]:
    stats.sort()
    r = len(stats)
    lo = int(math.floor((1 - level) / 2 * r))
    hi = min(r - 1, int(math.ceil((1 + level) / 2 * r)) - 1)
    return stats[lo], stats[hi]


def _resample(draw: list[Callable[[random.Random], float]], resamples: int, seed: int,
              level: float) -> tuple[float, float]:
    """Percentile interval of the mean over tasks: tasks drawn with replacement, then each drawn
    task's value drawn by its own ``draw`` (its repeats resampled)."""
    rng = random.Random(seed)
    T = len(draw)
    stats = []
    for _ in range(resamples):
        s = 0.0
        for i in rng.choices(range(T), k=T):
            s += draw[i](rng)
        stats.append(s / T)
    return _percentile(stats, level)


def bootstrap_sr(tasks: Sequence[tuple[int, int]], *, resamples: int = 2000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile interval of the suite SR (mean of per-task rates) from ``(n, c)`` per task,
    resampling tasks and then repeats; None without tasks."""
    tasks = [t for t in tasks if t[0] > 0]
    if not tasks or resamples < 1:
        return None
    return _resample([_sampler(n, c) for n, c in tasks], resamples, seed, level)


def bootstrap_paired(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]], *, resamples: int = 2000,
                     seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile interval of SR(A) - SR(B) over the same tasks (``(n, c)`` of each agent per task):
    tasks resampled together, each agent's repeats of a drawn task resampled on their own."""
    if len(a) != len(b):
        raise ValueError("paired tasks must have the same length")
    if not a or resamples < 1:
        return None

    def diff(x: Callable[[random.Random], float], y: Callable[[random.Random], float]):
        return lambda rng: x(rng) - y(rng)

    return _resample([diff(_sampler(*p), _sampler(*q)) for p, q in zip(a, b)], resamples, seed, level)


def sign_flip_p(diffs: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> float:
    """Two-sided p of the paired sign-flip test of mean(diffs) = 0: the share of sign patterns
    whose |sum| is at least the observed one (exact up to EXACT_FLIPS non-zero differences)."""
    d = [x for x in diffs if x != 0]
    if not d:
        return 1.0
    observed = abs(sum(d)) - 1e-12
    if len(d) <= EXACT_FLIPS:
        hits = sum(1 for signs in itertools.product((1, -1), repeat=len(d))
                   if abs(sum(s * x for s, x in zip(signs, d))) >= observed)
        return hits / 2 ** len(d)
    rng = random.Random(seed)
    hits = sum(1 for _ in range(resamples) if abs(sum(x if rng.random() < 0.5 else -x for x in d)) >= observed)
    return (hits + 1) / (resamples + 1)  # the observed pattern counts as one (Phipson & Smyth 2010)


def min_detectable(diffs: Sequence[float], alpha_z: float = Z95, power_z: float = Z80) -> float | None:
    """The smallest true mean difference a paired design over these tasks detects with 80% power
    at two-sided 0.05, from the observed spread of the per-task differences (None below 2 tasks or
    when they do not vary)."""
    _, sd = mean_sd(list(diffs))
    if sd is None or sd == 0:
        return None
    return (alpha_z + power_z) * sd / math.sqrt(len(diffs))
