"""Overhead of ``predict_interval`` over the model's own ``predict``.

Issue #12, target 5: ``FedConformalRegressor.predict_interval`` <= 1.05x
``predict``, Ridge included (the cheapest model, where the interval's own
work shows most). The interval is written into one preallocated C-ordered
``(n, 2)`` array, each column straight from the predictions; the script
checks the layout. Two estimates of the ratio: best time over best time
(interleaved rounds), and the median over rounds of the ratio of two
back-to-back calls (robust to load that drifts between rounds on a shared
machine). A third line per model times the floor of any interval: the
model's ``predict`` followed by one contiguous write of the ``2n`` output
floats (``np.concatenate``), the least memory traffic an ``(n, 2)``
float64 result can cost.

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
            "floor": lambda m=model: _predict_and_write(m, X),
        }
        cheap = name == "Ridge"
        times = _common.compare_times(funcs, repeat=31 if cheap else 3)
        paired = _paired_ratios(funcs, rounds=(201 if cheap else 3))
        t_pred, t_int, t_floor = times["predict"], times["interval"], times["floor"]
        record[name] = {
            "predict": t_pred,
            "predict_interval": t_int,
            "ratio": t_int / t_pred,
            "paired_median_ratio": paired["interval"],
            "floor": t_floor,
            "floor_ratio": t_floor / t_pred,
            "floor_paired_median_ratio": paired["floor"],
            "c_contiguous": bool(interval.flags.c_contiguous),
        }
        print(
            f"{name:26s} {t_pred * 1e3:11.2f} {t_int * 1e3:12.2f} "
            f"{t_int / t_pred:6.3f}x {paired['interval']:6.3f}x  {layout}"
        )
        print(
            f"{'  floor: predict + 2n write':26s} {'':11s} {t_floor * 1e3:12.2f} "
            f"{t_floor / t_pred:6.3f}x {paired['floor']:6.3f}x"
        )
    print("target: <= 1.05x")
    _common.save_record("predict_overhead", {"n_samples": n, "results": record})


def _predict_and_write(model, X):
    """The model's predictions, then one contiguous write of 2n floats."""
    y_pred = model.predict(X)
    return np.concatenate((y_pred, y_pred))


def _paired_ratios(funcs, *, rounds):
    """Median over rounds of each function's time over ``predict``'s.

    Within a round the functions run back to back, in an order reversed
    every other round, so that none always runs first.
    """
    names = list(funcs)
    ratios = {name: [] for name in names}
    for i in range(rounds):
        took = {}
        for name in names if i % 2 else names[::-1]:
            start = time.perf_counter()
            funcs[name]()
            took[name] = time.perf_counter() - start
        for name in names:
            ratios[name].append(took[name] / took["predict"])
    return {name: float(np.median(r)) for name, r in ratios.items()}


if __name__ == "__main__":
    main()
