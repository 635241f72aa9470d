"""Speed of FedCP²-QQ (dp-qq) fits: unequal sizes, many clients, n_jobs.

Issue 12, target 3: unequal client sizes cost <= 1.5x equal sizes at the same
total; fit time linear in the number of clients (20,000 clients <= 4x the
time of 5,000); an infeasible plan detected before any gamma search;
``n_jobs`` never slower than one job. Every fit starts from cold plan caches
(the plan is cached per process, so a warm refit would only time the
clients' mechanisms). Each cell is the best of ``--repeat`` fits.

Run: ``python benchmarks/bench_dp_qq_speed.py [--quick]``.
"""

import argparse
import time
import warnings

import _common  # noqa: F401
import numpy as np

from skfedcp.calibrators import PrivateQuantileOfQuantilesCalibrator, _private
from skfedcp.calibrators._qq_selection import select_qq_ranks
from skfedcp.exceptions import InfiniteThresholdWarning

ALPHA = 0.1


def clear_caches():
    for cached in (
        _private._dpqq_gamma_search,
        _private._qq_score,
        _private._dpqq_auto_bins,
        _private._dpqq_tight_search,
    ):
        cached.cache_clear()
    select_qq_ranks.cache_clear()
    _private._PLAN_MEMO._entries = {}


def fit_time(sizes, epsilon, repeat, n_jobs=None, seed=0):
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes)
    scores = rng.uniform(size=int(sizes.sum()))
    ids = np.repeat(np.arange(sizes.shape[0]), sizes)
    cal = PrivateQuantileOfQuantilesCalibrator(epsilon=epsilon, score_bounds=(0, 1))
    best = np.inf
    for _ in range(repeat):
        clear_caches()
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            cal.fit(scores, ids, alpha=ALPHA, random_state=seed, n_jobs=n_jobs)
        best = min(best, time.perf_counter() - start)
    return best, cal.calibration_info_["feasible"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller client counts")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    def report(name, a, b, goal):
        (ta, fa), (tb, fb) = a, b
        ratio = tb / ta
        rows.append({"case": name, "base_s": ta, "other_s": tb, "ratio": ratio})
        print(
            f"{name:<52s} {ta:8.3f} s {tb:8.3f} s {ratio:7.2f}x  (goal {goal})"
            f"  feasible {fa}/{fb}",
            flush=True,
        )

    print(f"{'case (base -> other)':<52s} {'base':>10s} {'other':>10s} {'ratio':>8s}")
    for eps in (5.0, 10.0):
        equal = fit_time([60] * 10, eps, args.repeat)
        unequal = fit_time(rng.integers(59, 62, size=10), eps, args.repeat)
        report(f"eps={eps:g}: 10 x 60 -> 10 of 59..61 rows", equal, unequal, "<= 1.5")
        equal = fit_time([200] * 20, eps, args.repeat)
        unequal = fit_time(rng.integers(150, 251, size=20), eps, args.repeat)
        report(
            f"eps={eps:g}: 20 x 200 -> 20 of 150..250 rows", equal, unequal, "<= 1.5"
        )
    small, large = (1250, 5000) if args.quick else (5000, 20_000)
    for n, eps in [(20, 10.0), (5, 5.0)]:
        a = fit_time([n] * small, eps, args.repeat)
        b = fit_time([n] * large, eps, args.repeat)
        report(f"{small} -> {large} clients x {n} rows, eps={eps:g}", a, b, "<= 4")
    start = time.perf_counter()
    clear_caches()
    plan = PrivateQuantileOfQuantilesCalibrator(epsilon=5.0, score_bounds=(0, 1)).plan(
        np.full(10_000, 5), ALPHA
    )
    seconds = time.perf_counter() - start
    print(
        f"plan of 10,000 x 5 rows at eps=5 (infeasible: {not plan['feasible']}): "
        f"{seconds:.4f} s"
    )
    rows.append({"case": "infeasible plan 10000 x 5", "seconds": seconds})
    one = fit_time([50] * 2000, 10.0, args.repeat, n_jobs=1)
    two = fit_time([50] * 2000, 10.0, args.repeat, n_jobs=2)
    report("2000 x 50, eps=10: n_jobs=1 -> n_jobs=2", one, two, "<= 1")
    _common.save_record("dp_qq_speed", {"alpha": ALPHA, "rows": rows})


if __name__ == "__main__":
    main()
