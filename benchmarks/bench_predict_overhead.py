"""Overhead of ``predict_interval`` over the model's own ``predict``.

Issue #12, target 5: ``FedConformalRegressor.predict_interval`` <= 1.05x
``predict``, Ridge included (the cheapest model, where the interval's own
work shows most). The interval is written into one preallocated C-ordered
``(n, 2)`` array, each column straight from the predictions; the script
checks the layout. Two estimates of the ratio: best time over best time
(interleaved rounds), and the median over rounds of the ratio of two
back-to-back calls (robust to load that drifts between rounds on a shared
machine).

Run: ``python benchmarks/bench_predict_overhead.py``.
"""

import argparse
import time

import _common  # noqa: F401
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import Ridge

from skfedcp import FedConformalRegressor


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = 10_000 if args.quick else args.n_samples
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 20))
    y = X[:, 0] + np.sin(X[:, 1]) + rng.normal(size=n)
    ids = np.repeat(np.arange(10), 200)
    models = {
        "Ridge": Ridge(),
        "HistGradientBoosting": HistGradientBoostingRegressor(max_iter=50),
        "RandomForest(50 trees)": RandomForestRegressor(
            n_estimators=50, max_depth=10, random_state=0
        ),
    }
    print(f"\npredict_interval vs predict on {n:,} rows x 20 features")
    print(
        f"{'model':26s} {'predict ms':>11s} {'interval ms':>12s} {'ratio':>7s} "
        f"{'paired':>7s}  layout"
    )
    record = {}
    for name, model in models.items():
        model.fit(X[:2000], y[:2000])
        reg = FedConformalRegressor(FrozenEstimator(model)).fit(
            X[2000:4000], y[2000:4000], client_ids=ids
        )
        interval = reg.predict_interval(X)
        layout = "C (n, 2)" if interval.flags.c_contiguous else "not C-ordered"
        funcs = {
            "predict": lambda m=model: m.predict(X),
            "interval": lambda r=reg: r.predict_interval(X),
        }
        cheap = name == "Ridge"
        times = _common.compare_times(funcs, repeat=31 if cheap else 3)
        paired = _paired_ratio(funcs, rounds=(61 if cheap else 3))
        t_pred, t_int = times["predict"], times["interval"]
        record[name] = {
            "predict": t_pred,
            "predict_interval": t_int,
            "ratio": t_int / t_pred,
            "paired_median_ratio": paired,
            "c_contiguous": bool(interval.flags.c_contiguous),
        }
        print(
            f"{name:26s} {t_pred * 1e3:11.2f} {t_int * 1e3:12.2f} "
            f"{t_int / t_pred:6.3f}x {paired:6.3f}x  {layout}"
        )
    print("target: <= 1.05x")
    _common.save_record("predict_overhead", {"n_samples": n, "results": record})


def _paired_ratio(funcs, *, rounds):
    """Median over rounds of interval/predict, timed back to back.

    The order alternates between rounds so neither call always runs first.
    """
    predict, interval = funcs["predict"], funcs["interval"]
    ratios = []
    for i in range(rounds):
        pair = (predict, interval) if i % 2 else (interval, predict)
        took = []
        for func in pair:
            start = time.perf_counter()
            func()
            took.append(time.perf_counter() - start)
        t_pred, t_int = took if i % 2 else took[::-1]
        ratios.append(t_int / t_pred)
    return float(np.median(ratios))


if __name__ == "__main__":
    main()
