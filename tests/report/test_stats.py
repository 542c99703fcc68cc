"""Wilson intervals, McNemar's test and the paired bootstrap against values computed by hand."""

from __future__ import annotations

import math

import pytest

from harness.report.stats import (cohen_kappa, compare_paired, mcnemar_exact, mcnemar_midp, paired_bootstrap,
                                  wilson)


def test_wilson_8_of_10():
    # p = 0.8, n = 10, z = 1.96: z^2 = 3.8416, denom = 1 + 3.8416/10 = 1.38416
    # centre = (0.8 + 3.8416/20) / 1.38416 = 0.99208 / 1.38416 = 0.716738
    # half = 1.96 * sqrt(0.8*0.2/10 + 3.8416/400) / 1.38416 = 1.96 * sqrt(0.025604) / 1.38416 = 0.226581
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.490157, abs=1e-4)
    assert hi == pytest.approx(0.943319, abs=1e-4)


def test_wilson_extremes():
    # 0/10: low 0; high = (0 + 0.19208 + 1.96 * sqrt(0.009604)) / 1.38416 = 0.38416 / 1.38416 = 0.277540
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.277540, abs=1e-4)
    lo, hi = wilson(10, 10)  # symmetric
    assert hi == 1.0 and lo == pytest.approx(1 - 0.277540, abs=1e-4)
    # 1/1: denom = 4.8416; centre = (1 + 1.9208)/4.8416 = 0.603272; half = 1.96*sqrt(0.9604)/4.8416 = 0.396728
    lo, hi = wilson(1, 1)
    assert lo == pytest.approx(0.206544, abs=1e-4) and hi == 1.0
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_mcnemar_exact_and_midp():
    # b = 1, c = 6: n = 7, P(X <= 1) = (1 + 7) / 128 = 0.0625; exact two-sided = 0.125
    # mid-p = 0.125 - P(X = 1) = 0.125 - 7/128 = 0.0703125
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_midp(1, 6) == pytest.approx(0.0703125)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)  # symmetric
    # b = 0, c = 5: exact = 2/32 = 0.0625; mid-p = 0.0625 - 1/32 = 0.03125
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625)
    assert mcnemar_midp(0, 5) == pytest.approx(0.03125)
    # b = 2, c = 8: P(X <= 2) = (1 + 10 + 45) / 1024 = 56/1024; exact = 112/1024 = 0.109375
    # mid-p = 0.109375 - 45/1024 = 67/1024 = 0.0654296875
    assert mcnemar_exact(2, 8) == pytest.approx(0.109375)
    assert mcnemar_midp(2, 8) == pytest.approx(0.0654296875)
    # no discordant pairs, or a balanced split: no evidence at all
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_midp(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_midp(3, 3) == 1.0


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    a = [1] * 8 + [0] * 2
    b = [1] * 4 + [0] * 6
    r1 = paired_bootstrap(a, b, resamples=500, seed=7)
    r2 = paired_bootstrap(a, b, resamples=500, seed=7)
    assert r1 == r2
    assert r1["diff"] == pytest.approx(0.4)
    assert r1["low"] <= 0.4 <= r1["high"]
    # identical outcomes: every resample is 0
    same = paired_bootstrap(a, a, resamples=100, seed=1)
    assert same["low"] == same["high"] == 0.0 and same["p"] == 1.0
    with pytest.raises(ValueError):
        paired_bootstrap([1], [1, 0])
    assert math.isnan(paired_bootstrap([], [])["diff"])


def test_compare_paired_counts():
    a = [True, True, True, False, False, True]
    b = [True, False, False, False, True, False]
    c = compare_paired(a, b, resamples=200, seed=0)
    assert (c.n, c.both, c.only_a, c.only_b, c.neither) == (6, 1, 3, 1, 1)
    assert c.sr_a == pytest.approx(4 / 6) and c.sr_b == pytest.approx(2 / 6)
    # b=3, c=1: n=4, P(X<=1) = 5/16, exact = 10/16 = 0.625, mid-p = 0.625 - 4/16 = 0.375
    assert c.p_exact == pytest.approx(0.625) and c.p_midp == pytest.approx(0.375)


def test_cohen_kappa():
    # tp=20 fp=5 fn=10 tn=15, n=50: po = 35/50 = 0.7; pe = (25*30 + 25*20)/2500 = 0.5; kappa = 0.4
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)
    assert cohen_kappa(0, 0, 0, 0) is None
