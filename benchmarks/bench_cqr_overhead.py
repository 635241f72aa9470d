"""Overhead of FedCQRRegressor over the quantile models' own predictions.

Two ratios per model, each against the time the frozen quantile model(s)
take to predict both bounds on the same rows (``forest.predict(X,
quantiles=[lo, hi])``, or ``lower.predict(X)`` plus ``upper.predict(X)``):

* ``predict_interval(X)`` on ``--n-samples`` test rows;
* calibration, ``fit(X_cal, y_cal, client_ids)`` with a frozen model, on 10
  clients of ``--n-samples / 10`` rows (QQ and central; the QQ rank plan is
  cached per client sizes after the first fit, so its one-off cost is
  reported separately).

Timing: the two sides of each ratio are timed alternately, ``--rounds``
times, with the process CPU clock (single-threaded BLAS/OpenMP), and the
minimum of each side is kept; on a shared machine this is far less sensitive
to other processes than separate wall-clock best-of runs.

Issue target: <= 1.1x. Run: ``python benchmarks/bench_cqr_overhead.py``.
"""

import argparse
import time

import _common  # noqa: F401
import numpy as np
from quantile_forest import RandomForestQuantileRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import QuantileRegressor

from skfedcp.regression import FedCQRRegressor

LEVELS = [0.05, 0.95]


def make_models(X, y):
    n_fit = 2000
    forest = RandomForestQuantileRegressor(
        n_estimators=100, min_samples_leaf=5, random_state=0
    ).fit(X[:n_fit], y[:n_fit])
    hgb = [
        HistGradientBoostingRegressor(
            loss="quantile", quantile=q, max_iter=100, random_state=0
        ).fit(X[:n_fit], y[:n_fit])
        for q in LEVELS
    ]
    linear = [
        QuantileRegressor(quantile=q, alpha=0.0).fit(X[:n_fit], y[:n_fit])
        for q in LEVELS
    ]
    return {
        "quantile forest (100 trees)": {"estimator": forest},
        "HGB quantile pair": dict(
            zip(["estimator_lower", "estimator_upper"], hgb, strict=True)
        ),
        "linear QuantileRegressor pair": dict(
            zip(["estimator_lower", "estimator_upper"], linear, strict=True)
        ),
    }


def own_predictions(models):
    if "estimator" in models:
        forest = models["estimator"]
        return lambda X: forest.predict(X, quantiles=LEVELS)
    lo, hi = models["estimator_lower"], models["estimator_upper"]
    return lambda X: (lo.predict(X), hi.predict(X))


def paired_min(baseline, candidate, rounds):
    """Min CPU seconds per call of two functions timed alternately."""
    best = [np.inf, np.inf]
    for _ in range(rounds):
        for j, func in enumerate((baseline, candidate)):
            start = time.process_time()
            func()
            best[j] = min(best[j], time.process_time() - start)
    return best


def paired_min_fast(baseline, candidate, rounds, number):
    """As ``paired_min`` for calls too fast to time one by one."""
    return [
        t / number
        for t in paired_min(
            lambda: [baseline() for _ in range(number)],
            lambda: [candidate() for _ in range(number)],
            rounds,
        )
    ]


def measure(models, X_cal, y_cal, ids, X_test, rounds):
    """Times of one model form: its own predictions against the wrapper's."""
    frozen = {k: FrozenEstimator(v) for k, v in models.items()}
    own = own_predictions(models)
    regs = {cal: FedCQRRegressor(**frozen, calibrator=cal) for cal in ("qq", "central")}
    start = time.perf_counter()
    regs["qq"].fit(X_cal, y_cal, client_ids=ids)  # cold: QQ plan not cached yet
    cold = time.perf_counter() - start
    regs["central"].fit(X_cal, y_cal, client_ids=ids)
    # Calls per timed block: enough for ~50 ms, so fast models are measurable.
    number = max(1, int(0.05 / max(_common.best_time(lambda: own(X_cal)), 1e-6)))
    t_own_test, t_int = paired_min_fast(
        lambda: own(X_test),
        lambda: regs["qq"].predict_interval(X_test),
        rounds,
        number,
    )
    t_fit, t_own_cal = {}, np.inf
    for cal, reg in regs.items():
        t_own, t_fit[cal] = paired_min_fast(
            lambda: own(X_cal),
            lambda r=reg: r.fit(X_cal, y_cal, client_ids=ids),
            rounds,
            number,
        )
        t_own_cal = min(t_own_cal, t_own)
    return {
        "own_predict_test": t_own_test,
        "predict_interval": t_int,
        "predict_interval_ratio": t_int / t_own_test,
        "own_predict_cal": t_own_cal,
        "fit_qq": t_fit["qq"],
        "fit_qq_ratio": t_fit["qq"] / t_own_cal,
        "fit_central": t_fit["central"],
        "fit_central_ratio": t_fit["central"] / t_own_cal,
        "fit_qq_cold": cold,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-samples", type=int, default=20_000)
    parser.add_argument("--n-features", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = 4_000 if args.quick else args.n_samples
    d = args.n_features
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000 + 2 * n, d))
    y = X[:, 0] + np.sin(X[:, 1]) + (0.5 + np.abs(X[:, 2])) * rng.normal(size=len(X))
    X_cal, y_cal = X[2000 : 2000 + n], y[2000 : 2000 + n]
    X_test = X[2000 + n :]
    ids = np.repeat(np.arange(10), n // 10)
    record = {}
    header = (
        f"{'model':30s} {'own pred ms':>11s} {'interval ms':>11s} {'ratio':>6s}"
        f" | {'own pred ms':>11s} {'fit qq ms':>10s} {'ratio':>6s}"
        f" {'fit central ms':>14s} {'ratio':>6s}"
    )
    print(
        f"\nFedCQRRegressor overhead: predict_interval on {n:,} rows, calibration "
        f"on 10 clients x {n // 10:,} rows, {d} features (frozen models, CPU "
        f"time, min of {args.rounds} alternated rounds)"
    )
    print(header)
    for name, models in make_models(X, y).items():
        record[name] = measure(models, X_cal, y_cal, ids, X_test, args.rounds)
        r = record[name]
        print(
            f"{name:30s} {r['own_predict_test'] * 1e3:11.2f} "
            f"{r['predict_interval'] * 1e3:11.2f} "
            f"{r['predict_interval_ratio']:5.3f}x | "
            f"{r['own_predict_cal'] * 1e3:11.2f} {r['fit_qq'] * 1e3:10.2f} "
            f"{r['fit_qq_ratio']:5.3f}x {r['fit_central'] * 1e3:14.2f} "
            f"{r['fit_central_ratio']:5.3f}x"
        )
    print("target: <= 1.1x. First (cold) QQ fit, rank plan included:")
    for name, r in record.items():
        print(f"  {name:30s} {r['fit_qq_cold'] * 1e3:8.1f} ms")
    _common.save_record(
        "cqr_overhead", {"n_samples": n, "n_features": d, "results": record}
    )


if __name__ == "__main__":
    main()
