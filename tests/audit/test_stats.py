"""Agreement statistics against hand-computed values and scikit-learn's implementation."""

from __future__ import annotations

import random

import pytest
from sklearn.metrics import cohen_kappa_score

from tracejudge.audit import agreement, bootstrap_ci, cohen_kappa, confusion, landis_koch


def test_kappa_by_hand() -> None:
    # 2x2 table: judge pass/label pass 20, pass/fail 5, fail/pass 10, fail/fail 15 (n=50).
    # po = 35/50 = 0.7; pe = (25/50)(30/50) + (25/50)(20/50) = 0.3 + 0.2 = 0.5; kappa = 0.2/0.5 = 0.4
    judge = ["pass"] * 25 + ["fail"] * 25
    label = ["pass"] * 20 + ["fail"] * 5 + ["pass"] * 10 + ["fail"] * 15
    assert cohen_kappa(judge, label) == pytest.approx(0.4)
    c = confusion(judge, label)
    assert (c.true_pass, c.false_pass, c.false_fail, c.true_fail) == (20, 5, 10, 15)


def test_weighted_kappa_by_hand() -> None:
    # Three ordered categories, linear weights: one item off by one category, one off by two.
    a = ["fail", "borderline", "pass", "pass"]
    b = ["fail", "pass", "pass", "fail"]
    order = ["fail", "borderline", "pass"]
    # observed disagreement = (0.5 + 1) / 4 = 0.375; marginals a: f1 b1 p2, b: f2 b0 p2
    # expected = sum w_ij r_i c_j / 16 = (f,p)1*1*2 + (b,f).5*1*2 + (b,p).5*1*2 + (p,f)1*2*2 = 2+1+1+4 = 8/16
    assert cohen_kappa(a, b, labels=order, weights="linear") == pytest.approx(1 - 0.375 / 0.5)


def test_undefined_kappa_is_none_not_a_number() -> None:
    assert cohen_kappa(["pass"] * 4, ["pass"] * 4) is None
    assert cohen_kappa([], []) is None


@pytest.mark.parametrize("seed", range(25))
def test_matches_sklearn_on_random_inputs(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(5, 200)
    cats = ["fail", "borderline", "pass"][: rng.choice([2, 3])]
    a = [rng.choice(cats) for _ in range(n)]
    # Correlated second rater, so kappa spans more than the near-zero of independent labels.
    b = [x if rng.random() < 0.6 else rng.choice(cats) for x in a]
    if len(set(a) | set(b)) < 2:
        return
    ours = cohen_kappa(a, b, labels=cats)
    assert ours == pytest.approx(cohen_kappa_score(a, b, labels=cats))
    for w in ("linear", "quadratic"):
        assert cohen_kappa(a, b, labels=cats, weights=w) == pytest.approx(
            cohen_kappa_score(a, b, labels=cats, weights=w)
        )


def test_bootstrap_interval_is_seeded_and_brackets_the_estimate() -> None:
    rng = random.Random(3)
    labels = [rng.choice(["pass", "fail"]) for _ in range(80)]
    judge = [x if rng.random() < 0.85 else ("fail" if x == "pass" else "pass") for x in labels]
    a = agreement(judge, labels)
    assert a.kappa_ci is not None
    assert a.kappa is not None
    assert a.kappa_ci[0] < a.kappa < a.kappa_ci[1]
    assert agreement(judge, labels).kappa_ci == a.kappa_ci
    # A percentile bootstrap of the mean of 0/1 data by hand: interval inside [0, 1] and around 0.5.
    data = [0, 1] * 20
    ci = bootstrap_ci(len(data), lambda idx: sum(data[i] for i in idx) / len(idx))
    assert ci is not None
    assert 0.3 < ci[0] < 0.5 < ci[1] < 0.7


def test_leniency_and_flags() -> None:
    labels = ["pass"] * 5 + ["fail"] * 5
    judge = ["pass"] * 9 + ["indeterminate"]
    a = agreement(judge, labels)
    assert a.n == 9
    assert a.indeterminate == 1
    assert a.bias == "lenient"
    assert a.judge_pass_rate == 1.0
    assert any(f.startswith("constant_judge") for f in a.flags)
    skew = agreement(["pass"] * 20, ["pass"] * 19 + ["fail"])
    assert skew.accuracy == pytest.approx(0.95)
    assert any(f.startswith("skewed_labels") for f in skew.flags)
    balanced = agreement(["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "pass"])
    # Balanced labels: kappa is exactly 2 x accuracy - 1.
    assert balanced.kappa == pytest.approx(2 * 0.5 - 1)
    assert any(f.startswith("balanced_labels") for f in balanced.flags)


def test_landis_koch() -> None:
    assert landis_koch(None) == "undefined"
    assert landis_koch(-0.1).startswith("poor")
    assert landis_koch(0.2) == "slight"
    assert landis_koch(0.55) == "moderate"
    assert landis_koch(0.61) == "substantial"
    assert landis_koch(0.9) == "almost perfect"
