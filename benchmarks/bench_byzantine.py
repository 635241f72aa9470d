"""QQ with a rank rule certified against c dishonest clients, beside Rob-FCP.

100 clients of 50 calibration rows (alpha = 0.1); the scores of every honest
client and of the test point are i.i.d. half-normal, so the coverage of a
threshold ``T`` is ``F(T) = erf(T / sqrt(2))`` exactly (no test-sampling
noise). ``c`` of the clients are dishonest; per ``c`` and attack:

* ``qq byz``: ``QuantileOfQuantilesCalibrator(n_byzantine=c)``; ``cert`` is
  its certified lower bound (``coverage_bounds_.lower``);
* ``qq c=0``: the usual plan (``n_byzantine=0``) under the same attack;
* ``Rob-FCP`` (Kang et al., ICML 2024, re-implemented from the paper):
  every client sends the histogram of its scores (100 bins on [0, 5]); the
  server scores each client by the summed L2 distance of its normalised
  histogram to the others', drops the ``c`` most distant and returns the
  ``ceil((1 - alpha)(N' + 1))``-th smallest of the kept rows (the upper edge
  of its bin; ``+inf`` beyond ``N'``).

Attacks (the dishonest clients' messages; for Rob-FCP their histograms):

* ``max``: the largest value that passes validation (QQ: the largest float;
  Rob-FCP: all mass in the top bin);
* ``min``: the smallest (QQ: minus the largest float; Rob-FCP: bottom bin);
* ``noise``: N(0, 1) values (Rob-FCP: the histogram of 50 of them, clipped);
* ``copy``: a copy of honest client 0's message;
* ``adaptive``: what lowers coverage most while passing validation. QQ:
  just below the smallest honest message (the threshold falls to the
  ``(k - c)``-th honest value, the certified worst case). Rob-FCP: a copy
  of an honest histogram whose top 30% of mass is moved to the bottom bin,
  close to the others in distance but pulling the pooled quantile down.

Reported: mean coverage +- its standard error over the repetitions, and the
fraction of repetitions with a finite threshold.

A second table runs dp-qq (``PrivateQuantileOfQuantilesCalibrator``,
epsilon = 10, 100 bins on the public range [0, 5], the same grid as Rob-FCP's
histograms) with ``n_byzantine=c``, for ``rule="paper"`` (the default) and
``rule="tight"`` with ``utility="rank"`` (the paper's utility drifts up, so
its thresholds sit near the top of the range on these scores), beside its
``n_byzantine=0`` plan under the same attack. The honest clients release
their private quantiles (each client's own stream); the dishonest ones send
what passes validation (a bin edge or ``+inf``):

* ``max``: ``+inf``; ``min``: the smallest edge;
* ``noise``: N(0, 1) values rounded up to the grid;
* ``copy``: honest client 0's release;
* ``adaptive``: the largest edge below the smallest honest release (the
  smallest edge when there is none), so the threshold falls to the
  ``(k - c)``-th honest release, the certified worst case.

A ``c`` with no certified plan is reported as infeasible, with the reason.

``--plans``: instead, the CPU time of one cold plan per case (each number
from its own fresh process, killed after ``--timeout`` seconds): QQ and dp-qq
(paper rule, epsilon = 10, alpha = 0.1) with ``n_byzantine`` on unequal sizes
drawn from 10-1,000 (``np.random.default_rng(0)``) and on equal sizes; and
``max_byzantine`` of a QQ plan (the plan itself not timed). Two columns:
``fit s``, the plan a fit pays (the server's ``_server_plan``: for QQ the
ranks, ``k`` and certified lower bound only, its all-honest coverage and
upper bound being computed when ``calibration_info_`` / ``coverage_bounds_``
are read; dp-qq's fit runs :meth:`plan`), and ``plan() s``, :meth:`plan`
with every report. For ``max_byzantine`` both columns time the same call,
after a fit plan and after a full plan (its caches warmed by each).

Usage: ``python bench_byzantine.py [--quick] [--reps R] [--dp-reps R]``
(``--quick``: 20 repetitions, dp-qq with ``rule="paper"`` only), or
``python bench_byzantine.py --plans [--timeout S]``.
"""

import argparse
import json
import math
import time
import warnings

import _common  # single-threaded BLAS; fresh interpreters
import numpy as np
from scipy.special import erf

from skfedcp.calibrators import (
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
    max_byzantine,
)

M, N, ALPHA = 100, 50, 0.1
CS = (0, 10, 20, 40, 45)
ATTACKS = ("max", "min", "noise", "copy", "adaptive")
BINS = np.linspace(0.0, 5.0, 101)


def _coverage(t):
    return 1.0 if t == np.inf else float(erf(max(t, 0.0) / math.sqrt(2.0)))


def _summaries(out, reps):
    """Per contender: mean coverage, its Monte Carlo SE, share of finite thresholds."""
    summary = {}
    for name, ts in out.items():
        cov = np.array([_coverage(t) for t in ts])
        summary[name] = (
            cov.mean(),
            cov.std(ddof=1) / math.sqrt(reps),
            float(np.isfinite(ts).mean()),
        )
    return summary


def _qq_attack(kind, honest, c, rng):
    if kind == "max":
        return np.full(c, np.finfo(float).max)
    if kind == "min":
        return np.full(c, -np.finfo(float).max)
    if kind == "noise":
        return rng.normal(size=c)
    if kind == "copy":
        return np.full(c, honest[0])
    return np.full(c, np.nextafter(honest.min(), -np.inf))  # adaptive


def _hist(scores):
    return np.histogram(np.clip(scores, BINS[0], BINS[-1]), BINS)[0]


def _rob_attack(kind, honest_hists, c, rng):
    if c == 0:
        return np.zeros((0, BINS.size - 1), dtype=np.int64)
    h = np.zeros((c, BINS.size - 1), dtype=np.int64)
    if kind == "max":
        h[:, -1] = N
    elif kind == "min":
        h[:, 0] = N
    elif kind == "noise":
        h = np.array([_hist(rng.normal(size=N)) for _ in range(c)])
    elif kind == "copy":
        h[:] = honest_hists[0]
    else:  # adaptive: an honest histogram with its top 30% moved to bin 0
        base = honest_hists[0].copy()
        cum = np.cumsum(base[::-1])
        top = np.flatnonzero(cum <= 0.3 * N)
        moved = base[::-1][top].sum()
        base[::-1][top] = 0
        base[0] += moved
        h[:] = base
    return h


def rob_fcp(hists, c):
    """Rob-FCP's server: drop the c most distant histograms, pooled quantile."""
    freq = hists / hists.sum(axis=1, keepdims=True)
    dist = np.sqrt(((freq[:, None, :] - freq[None, :, :]) ** 2).sum(axis=2))
    keep = np.argsort(dist.sum(axis=1), kind="stable")[: hists.shape[0] - c]
    pooled = hists[keep].sum(axis=0)
    total = int(pooled.sum())
    r = math.ceil((1.0 - ALPHA) * (total + 1) - 1e-9)
    if r > total:
        return np.inf
    b = int(np.searchsorted(np.cumsum(pooled), r))
    return float(BINS[b + 1]) if b + 1 < BINS.size - 1 else np.inf


def run(reps, seed=0):
    sizes = [N] * M
    plain = QuantileOfQuantilesCalibrator()
    plain_plan = plain.plan(sizes, ALPHA)
    rows = []
    for c in CS:
        cal = QuantileOfQuantilesCalibrator(n_byzantine=c)
        plan = cal.plan(sizes, ALPHA)
        lower, upper = cal.coverage_bounds(sizes, ALPHA)
        for kind in ATTACKS if c else ("none",):
            rng = np.random.default_rng([seed, c, ATTACKS.index(kind) if c else 9])
            out = {"byz": [], "plain": [], "rob": []}
            for _ in range(reps):
                scores = np.abs(rng.normal(size=(M - c, N)))
                results = {}
                for name, p in (("byz", plan), ("plain", plain_plan)):
                    honest = np.sort(scores, axis=1)[:, p["local_ranks"][0] - 1]
                    values = np.r_[honest, _qq_attack(kind, honest, c, rng)]
                    t = float(np.partition(values, p["k"] - 1)[p["k"] - 1])
                    results[name] = t
                hists = np.array([_hist(s) for s in scores])
                hists = np.r_[hists, _rob_attack(kind, hists, c, rng)]
                results["rob"] = rob_fcp(hists, c)
                for name, t in results.items():
                    out[name].append(t)
            row = {"c": c, "attack": kind, "cert": lower, "upper": upper}
            row.update(_summaries(out, reps))
            rows.append(row)
    return rows


# -- dp-qq -------------------------------------------------------------------

DP_EPSILON = 10.0
# What a dp-qq client may send: an inner edge of the grid or +inf.
DP_GRID = np.r_[BINS[1:-1], np.inf]


def _dp_attack(kind, honest, c, rng):
    if kind == "max":
        return np.full(c, np.inf)
    if kind == "min":
        return np.full(c, DP_GRID[0])
    if kind == "noise":
        noise = rng.normal(size=c)
        return DP_GRID[np.minimum(np.searchsorted(DP_GRID, noise), DP_GRID.size - 1)]
    if kind == "copy":
        return np.full(c, honest[0])
    below = DP_GRID[DP_GRID < honest.min()]  # adaptive
    return np.full(c, below[-1] if below.size else DP_GRID[0])


def _dp_plan(c, rule):
    """``(calibrator, plan, certified lower bound)``, or the reason it is infeasible."""
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=DP_EPSILON,
        score_bounds=(0.0, 5.0),
        rule=rule,
        utility="rank" if rule == "tight" else "quantile",
        n_byzantine=c,
    )
    try:
        plan = cal.plan(np.full(M, N), ALPHA)
    except ValueError as error:
        return cal, None, str(error)
    return cal, plan, plan["coverage_lower"]


def run_dp(reps, rule, seed=0):
    """Per ``c``: each repetition's honest releases (one fit per calibrator),
    then every attack on those same releases (paired: the attacks differ
    only in the dishonest messages, and each repetition costs two fits, not
    two per attack)."""
    sizes = np.full(M, N)
    ids = np.repeat(np.arange(M), N)
    plain, plain_plan, plain_lower = _dp_plan(0, rule)
    rows = []
    for c in CS:
        cal, plan, lower = _dp_plan(c, rule)
        if plan is None:
            rows.append({"c": c, "attack": "-", "infeasible": lower})
            continue
        kinds = ATTACKS if c else ("none",)
        data_rng = np.random.default_rng([seed, c, 9])
        attack_rngs = {
            kind: np.random.default_rng([seed, c, ATTACKS.index(kind) if c else 9, 1])
            for kind in kinds
        }
        out = {kind: {"byz": [], "plain": []} for kind in kinds}
        for r in range(reps):
            scores = np.abs(data_rng.normal(size=M * N))
            for name, fitted in (("byz", cal), ("plain", plain)):
                fitted.fit(
                    scores,
                    ids,
                    alpha=ALPHA,
                    random_state=np.random.SeedSequence([seed, c, r]),
                )
                honest = fitted.messages_["quantile"][: M - c]
                for kind in kinds:
                    attack = _dp_attack(kind, honest, c, attack_rngs[kind])
                    messages = {"n": sizes, "quantile": np.r_[honest, attack]}
                    t = fitted.server_step(messages, alpha=ALPHA, n_per_client=sizes)
                    out[kind][name].append(t)
        for kind in kinds:
            row = {"c": c, "attack": kind, "cert": lower, "k": plan["k"]}
            row.update(_summaries(out[kind], reps))
            rows.append(row)
    return rows, plain_plan["k"]


def _print_dp(rows, rule, plain_k, reps):
    print(
        f"\ndp-qq rule={rule!r}{', utility=rank' if rule == 'tight' else ''}, "
        f"epsilon={DP_EPSILON:g}, {BINS.size - 1} bins on [0, 5], {reps} "
        f"repetitions (the n_byzantine=0 plan takes k={plain_k})"
    )
    print(
        f"{'c':>2} {'attack':<8} {'k':>3} {'cert':>6} {'dp-qq byz':>16} {'fin':>4} "
        f"{'dp-qq c=0':>16} {'fin':>4}"
    )
    for r in rows:
        if "infeasible" in r:
            print(f"{r['c']:>2} infeasible: {r['infeasible']}")
            continue
        cells = " ".join(
            f"{r[n][0]:.4f} +- {r[n][1]:.4f} {r[n][2]:>4.2f}" for n in ("byz", "plain")
        )
        print(f"{r['c']:>2} {r['attack']:<8} {r['k']:>3} {r['cert']:.4f} {cells}")


#: (label, calibrator, n_byzantine, sizes) of the ``--plans`` table.
PLAN_CASES = (
    ("qq, 100 unequal", "qq", 5, ("unequal", 100)),
    ("qq, 1,000 unequal", "qq", 10, ("unequal", 1000)),
    ("qq, 200 x 200 rows", "qq", 1, ("equal", 200, 200)),
    ("dp-qq paper, 100 unequal", "dp-qq", 5, ("unequal", 100)),
    ("dp-qq paper, 1,000 unequal", "dp-qq", 10, ("unequal", 1000)),
    ("dp-qq paper, 100 x 100 rows", "dp-qq", 1, ("equal", 100, 100)),
    ("dp-qq paper, 100 x 200 rows", "dp-qq", 1, ("equal", 100, 200)),
    ("dp-qq paper, 200 x 200 rows", "dp-qq", 1, ("equal", 200, 200)),
    ("dp-qq paper, 201 x 200 rows", "dp-qq", 1, ("equal", 201, 200)),
    ("qq max_byzantine, 100 unequal", "qq-max", 5, ("unequal", 100)),
    ("qq max_byzantine, 1,000 unequal", "qq-max", 10, ("unequal", 1000)),
)


def _plan_case(spec):
    """Plan case ``spec = [index, full]`` of ``PLAN_CASES`` cold (the fit's
    plan, or ``plan()`` when ``full``); print its CPU seconds."""
    index, full = spec
    _, name, c, sizes_spec = PLAN_CASES[index]
    if sizes_spec[0] == "unequal":
        sizes = np.random.default_rng(0).integers(10, 1001, sizes_spec[1])
    else:
        sizes = np.full(sizes_spec[1], sizes_spec[2])
    if name.startswith("qq"):
        cal = QuantileOfQuantilesCalibrator(n_byzantine=c)
    else:
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=10.0, score_bounds=(0, 1), n_byzantine=c
        )
    start = time.process_time()
    plan = cal.plan(sizes, ALPHA) if full else cal._server_plan(sizes, ALPHA, None)
    seconds = time.process_time() - start
    tail = ""
    if name == "qq-max":  # the tolerance of the plan, after it (not timed)
        start = time.process_time()
        tolerated = max_byzantine(sizes, ALPHA, plan["local_ranks"], plan["k"])
        seconds = time.process_time() - start
        tail = f" max_byzantine={tolerated}"
    plan_text = f"k={plan['k']} lower={plan['coverage_lower']:.6f}{tail}"
    print(json.dumps([f"{seconds:.3f}", plan_text]))


def run_plans(timeout):
    """The ``--plans`` table, each number from a fresh process (importing
    this checkout, see ``_common.run_fresh``)."""
    print(f"{'plan (n_byzantine = c)':<32} {'c':>3} {'fit s':>7} {'plan() s':>8}  plan")
    for index, (label, _, c, _) in enumerate(PLAN_CASES):
        cells, text = [], "(killed)"
        for full in (False, True):
            done = _common.run_fresh(__file__, "plan-case", [index, full], timeout)
            cells.append(done[0] if done else f"> {timeout:g}")
            text = done[1] if done else text
        print(f"{label:<32} {c:>3} {cells[0]:>7} {cells[1]:>8}  {text}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", action="store_true", help="time cold plans")
    parser.add_argument("--timeout", type=float, default=300.0, help="per plan")
    parser.add_argument(
        "--plan-case", type=json.loads, default=None, help=argparse.SUPPRESS
    )
    parser.add_argument("--quick", action="store_true", help="20 repetitions")
    parser.add_argument("--reps", type=int, default=400, help="repetitions")
    parser.add_argument(
        "--dp-reps", type=int, default=None, help="dp-qq repetitions (default: reps)"
    )
    args = parser.parse_args()
    if args.plan_case is not None:
        return _plan_case(args.plan_case)
    if args.plans:
        return run_plans(args.timeout)
    reps = 20 if args.quick else args.reps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = run(reps)
    print(f"m={M} clients x n={N} rows, alpha={ALPHA}, {reps} repetitions; ")
    print("coverage: mean +- SE over repetitions (fin: share of finite thresholds)")
    head = (
        f"{'c':>2} {'attack':<8} {'cert':>6} {'qq byz':>16} {'fin':>4} "
        f"{'qq c=0':>16} {'fin':>4} {'Rob-FCP':>16} {'fin':>4}"
    )
    print(head)
    for r in rows:
        cells = " ".join(
            f"{r[n][0]:.4f} +- {r[n][1]:.4f} {r[n][2]:>4.2f}"
            for n in ("byz", "plain", "rob")
        )
        print(f"{r['c']:>2} {r['attack']:<8} {r['cert']:.4f} {cells}")
    dp_reps = reps if args.dp_reps is None else args.dp_reps
    # The tight plans take minutes (the c = 0 one most): not with --quick.
    for rule in ("paper",) if args.quick else ("paper", "tight"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows, plain_k = run_dp(dp_reps, rule)
        _print_dp(rows, rule, plain_k, dp_reps)


if __name__ == "__main__":
    main()
