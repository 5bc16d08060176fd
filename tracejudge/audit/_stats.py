"""Agreement statistics written out by hand: Cohen's kappa (plain and weighted), the confusion
matrix, a percentile bootstrap, the Landis-Koch reading. Pure functions over label sequences."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from typing import Literal, NamedTuple, TypeVar

from tracejudge.schema import Agreement, Confusion

T = TypeVar("T", bound=Hashable)
Weights = Literal["linear", "quadratic"] | None

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240611


def _disagreement(i: int, j: int, k: int, weights: Weights) -> float:
    """Disagreement weight of categories ``i`` and ``j`` of ``k``: 0 on the diagonal, growing with
    distance between ordered categories."""
    if weights is None:
        return 0.0 if i == j else 1.0
    d = abs(i - j) / (k - 1) if k > 1 else 0.0
    return d if weights == "linear" else d * d


class _Contingency(NamedTuple):
    """Counts of (rater a's category, rater b's category) over the items, categories by index."""

    counts: list[list[int]]

    @classmethod
    def of(cls, a: Sequence[T], b: Sequence[T], cats: Sequence[T]) -> _Contingency:
        index = {c: i for i, c in enumerate(cats)}
        counts = [[0] * len(cats) for _ in cats]
        for x, y in zip(a, b, strict=True):
            if x not in index or y not in index:
                raise ValueError(f"label {x if x not in index else y!r} is not among {list(cats)!r}")
            counts[index[x]][index[y]] += 1
        return cls(counts)

    def disagreement(self, weights: Weights) -> tuple[float, float]:
        """Weighted disagreement (observed, expected by chance from the margins), as shares."""
        k = len(self.counts)
        rows = [sum(r) for r in self.counts]
        cols = [sum(self.counts[i][j] for i in range(k)) for j in range(k)]
        n = sum(rows)
        cells = [(i, j) for i in range(k) for j in range(k)]
        observed = sum(_disagreement(i, j, k, weights) * self.counts[i][j] for i, j in cells) / n
        expected = sum(_disagreement(i, j, k, weights) * rows[i] * cols[j] for i, j in cells) / (n * n)
        return observed, expected


def cohen_kappa(
    a: Sequence[T], b: Sequence[T], *, labels: Sequence[T] | None = None, weights: Weights = None
) -> float | None:
    """Cohen's kappa between two raters' labels of the same items.

    With ``weights`` (``linear`` or ``quadratic``) ``labels`` gives the category order and
    disagreements are weighted by distance. Returns None when kappa is undefined (chance agreement
    is total, e.g. both raters gave one and the same label throughout)."""
    if len(a) != len(b):
        raise ValueError("both raters must label the same items")
    if len(a) == 0:
        return None
    cats: list[T] = list(labels) if labels is not None else sorted(set(a) | set(b), key=repr)
    observed, expected = _Contingency.of(a, b, cats).disagreement(weights)
    if expected == 0:
        return None
    return 1.0 - observed / expected


def confusion(judge: Sequence[str], labels: Sequence[str]) -> Confusion:
    """Counts of judge pass/fail against label pass/fail (other values are ignored)."""
    tp = tf = fp = ff = 0
    for j, lab in zip(judge, labels, strict=True):
        if j == "pass" and lab == "pass":
            tp += 1
        elif j == "fail" and lab == "fail":
            tf += 1
        elif j == "pass" and lab == "fail":
            fp += 1
        elif j == "fail" and lab == "pass":
            ff += 1
    return Confusion(true_pass=tp, true_fail=tf, false_pass=fp, false_fail=ff)


def bootstrap_ci(
    n: int,
    statistic: Callable[[Sequence[int]], float | None],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic`` over item indices resampled with replacement.

    Resamples where the statistic is undefined are left out; None when fewer than half are defined
    or there are fewer than two items. Seeded: the same input gives the same interval."""
    if n < 2 or resamples <= 0:
        return None
    rng = random.Random(seed)
    values: list[float] = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        v = statistic(idx)
        if v is not None and not math.isnan(v):
            values.append(v)
    if not values or len(values) * 2 < resamples:
        return None
    values.sort()
    lo_q = (1 - level) / 2
    return (_quantile(values, lo_q), _quantile(values, 1 - lo_q))


def _quantile(ordered: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default), so figures match it.
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def kappa_ci(a: Sequence[str], b: Sequence[str], **kwargs: int) -> tuple[float, float] | None:
    """Bootstrap interval of Cohen's kappa between two label sequences."""
    return bootstrap_ci(len(a), lambda idx: cohen_kappa([a[i] for i in idx], [b[i] for i in idx]), **kwargs)


def landis_koch(kappa: float | None) -> str:
    """The Landis and Koch (1977) reading of a kappa."""
    if kappa is None:
        return "undefined"
    if kappa < 0:
        return "poor (worse than chance)"
    for bound, word in ((0.20, "slight"), (0.40, "fair"), (0.60, "moderate"), (0.80, "substantial")):
        if kappa <= bound:
            return word
    return "almost perfect"


def _flags(n: int, judge: Sequence[str], labels: Sequence[str], accuracy: float | None) -> list[str]:
    flags: list[str] = []
    if n == 0:
        return ["no_items: no item has both a pass/fail label and a pass/fail judge verdict"]
    rate = labels.count("pass") / n
    if n < 30:
        flags.append(f"few_items: {n} items; the interval is wide, label more before trusting a decimal")
    if 0.45 <= rate <= 0.55 and accuracy is not None:
        flags.append(
            f"balanced_labels: with about half the labels passing, kappa is close to 2 x accuracy - 1"
            f" ({2 * accuracy - 1:.2f}) and says little beyond accuracy"
        )
    if rate <= 0.2 or rate >= 0.8:
        major = "pass" if rate >= 0.5 else "fail"
        share = max(rate, 1 - rate)
        flags.append(
            f"skewed_labels: {share:.0%} of labels are {major}; a judge that always says {major}"
            f" would be {share:.0%} accurate, read kappa, not accuracy"
        )
    if len(set(judge)) == 1:
        flags.append(f"constant_judge: the judge said {judge[0]} for every item; kappa cannot credit it")
    if len(set(labels)) == 1:
        flags.append(f"constant_labels: every label is {labels[0]}; kappa is undefined or meaningless")
    return flags


class _Binary(NamedTuple):
    """The figures over the items both sides called pass or fail; all None when there are none."""

    accuracy: float | None = None
    kappa: float | None = None
    kappa_ci: tuple[float, float] | None = None
    judge_pass_rate: float | None = None
    label_pass_rate: float | None = None

    @classmethod
    def of(cls, js: Sequence[str], ls: Sequence[str], resamples: int) -> _Binary:
        n = len(js)
        if n == 0:
            return cls()
        return cls(
            accuracy=sum(1 for j, lab in zip(js, ls, strict=True) if j == lab) / n,
            kappa=cohen_kappa(js, ls, labels=["fail", "pass"]),
            kappa_ci=kappa_ci(js, ls, resamples=resamples),
            judge_pass_rate=js.count("pass") / n,
            label_pass_rate=ls.count("pass") / n,
        )

    @property
    def pass_rate_difference(self) -> float | None:
        """Judge pass rate minus label pass rate."""
        if self.judge_pass_rate is None or self.label_pass_rate is None:
            return None
        return self.judge_pass_rate - self.label_pass_rate


def _bias(diff: float | None, n: int) -> Literal["lenient", "strict", "even"] | None:
    """Which way the judge's pass rate leans from the labels' (``diff`` = judge - labels, n items)."""
    if diff is None:
        return None
    # Within one item's worth of difference the rates are called even.
    if abs(diff) <= max(0.05, 1 / n) + 1e-9:
        return "even"
    return "lenient" if diff > 0 else "strict"


def _weighted_kappa(judge_buckets: Sequence[str] | None, labels: Sequence[str]) -> float | None:
    """Linear-weighted kappa of the judge's fail / borderline / pass buckets against the labels."""
    if judge_buckets is None:
        return None
    order = ["fail", "borderline", "pass"]
    wpairs = [(b, lab) for b, lab in zip(judge_buckets, labels, strict=True) if b in order]
    if not wpairs:
        return None
    return cohen_kappa([p[0] for p in wpairs], [p[1] for p in wpairs], labels=order, weights="linear")


def _both_decided(judge: Sequence[str], labels: Sequence[str]) -> tuple[list[str], list[str]]:
    """The judge verdicts and labels of the items with a pass/fail on both sides."""
    pairs = [
        (j, lab) for j, lab in zip(judge, labels, strict=True) if j != "indeterminate" and lab != "borderline"
    ]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def agreement(
    judge: Sequence[str],
    labels: Sequence[str],
    *,
    judge_buckets: Sequence[str] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Agreement:
    """Agreement of judge verdicts (pass / fail / indeterminate) with labels (pass / fail / borderline).

    Binary figures use items with a pass/fail verdict on both sides. The weighted kappa uses every
    item the judge decided, with ``judge_buckets`` (fail / borderline / pass from the score) against
    the labels."""
    if len(judge) != len(labels):
        raise ValueError("one judge verdict per label")
    js, ls = _both_decided(judge, labels)
    n = len(js)
    b = _Binary.of(js, ls, resamples)
    diff = b.pass_rate_difference
    return Agreement(
        n=n,
        accuracy=b.accuracy,
        kappa=b.kappa,
        kappa_ci=b.kappa_ci,
        weighted_kappa=_weighted_kappa(judge_buckets, labels),
        judge_pass_rate=b.judge_pass_rate,
        label_pass_rate=b.label_pass_rate,
        bias=_bias(diff, n),
        bias_difference=diff,
        confusion=confusion(js, ls),
        indeterminate=sum(1 for j in judge if j == "indeterminate"),
        borderline_labels=sum(1 for lab in labels if lab == "borderline"),
        interpretation=landis_koch(b.kappa),
        flags=tuple(_flags(n, js, ls, b.accuracy)),
    )
