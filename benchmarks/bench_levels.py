"""Several confidence levels from one fit, on Bikeshare's 12 monthly clients.

Acceptance script of issue 24. In each of ``--n-splits`` random splits,
every client's (month's) rows are split 40% train / 40% calibration / 20%
test; a gradient-boosting model is fitted on the pooled training rows and
frozen; then

* one ``FedConformalRegressor(alpha=[0.2, 0.1, 0.05])`` fit calibrates the
  three levels in one round (each client sends one message per level);
* its ``predict_interval`` has shape ``(n_test, 2, 3)``; coverage per level
  on the held-out rows, and a check that the intervals are nested (a smaller
  alpha never gives a narrower interval on any row);
* the time of that fit is compared with three separate scalar fits (same
  process, interleaved timing), and each level's threshold with the
  separate fit's (equal for the non-private calibrators).

The same is run for ``"qq"`` and ``"central"``, and for ``"dp-qq"`` with
``epsilon=9`` split equally among the levels (``epsilon_spent_`` per level
and in total; its thresholds differ from separate fits at ``epsilon=9``, by
design). The dp-qq fits warn when a level is infeasible (an infinite
threshold); those warnings are silenced here, the table shows ``inf``.

Run: ``python benchmarks/bench_levels.py`` (``--quick``: 2 splits).
"""

import argparse
import warnings

import _common  # noqa: F401
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp import FedConformalRegressor
from skfedcp.datasets import load_bikeshare
from skfedcp.exceptions import InfiniteThresholdWarning
from skfedcp.metrics import coverage_score, mean_width_score

LEVELS = [0.2, 0.1, 0.05]
SETTINGS = {
    "qq": {"calibrator": "qq"},
    "central": {"calibrator": "central"},
    "dp-qq": {"calibrator": "dp-qq", "epsilon": 9.0, "score_bounds": (0.0, 4.0)},
}


def split_by_client(client_ids, rng, fractions=(0.4, 0.4)):
    """Train / calibration / test row indices, split within each client."""
    parts = ([], [], [])
    for c in np.unique(client_ids):
        rows = rng.permutation(np.flatnonzero(client_ids == c))
        a = int(fractions[0] * len(rows))
        b = a + int(fractions[1] * len(rows))
        for part, chunk in zip(parts, (rows[:a], rows[a:b], rows[b:]), strict=True):
            part.append(chunk)
    return [np.sort(np.concatenate(p)) for p in parts]


def is_nested(intervals, alphas):
    order = np.argsort(-np.asarray(alphas))
    lo, hi = intervals[:, 0, order], intervals[:, 1, order]
    return bool(np.all(np.diff(lo, axis=1) <= 0) and np.all(np.diff(hi, axis=1) >= 0))


def run_split(X, y, c, seed):
    rng = np.random.default_rng(seed)
    train, cal, test = split_by_client(c, rng)
    model = HistGradientBoostingRegressor(max_iter=200, random_state=seed)
    model = FrozenEstimator(model.fit(X[train], y[train]))
    rows = {}
    for name, params in SETTINGS.items():
        multi = FedConformalRegressor(
            model, alpha=LEVELS, random_state=seed, **params
        ).fit(X[cal], y[cal], client_ids=c[cal])
        intervals = multi.predict_interval(X[test])
        singles = [
            FedConformalRegressor(model, alpha=a, random_state=seed, **params).fit(
                X[cal], y[cal], client_ids=c[cal]
            )
            for a in LEVELS
        ]
        times = _common.compare_times(
            {
                "one fit, 3 levels": lambda p=params: FedConformalRegressor(
                    model, alpha=LEVELS, random_state=seed, **p
                ).fit(X[cal], y[cal], client_ids=c[cal]),
                "3 separate fits": lambda p=params: [
                    FedConformalRegressor(model, alpha=a, random_state=seed, **p).fit(
                        X[cal], y[cal], client_ids=c[cal]
                    )
                    for a in LEVELS
                ],
            },
            repeat=5,
        )
        rows[name] = {
            "shape": intervals.shape,
            "coverage": [coverage_score(y[test], intervals[:, :, j]) for j in range(3)],
            "width": [mean_width_score(intervals[:, :, j]) for j in range(3)],
            "nested": is_nested(intervals, LEVELS),
            "same_as_separate": [
                bool(multi.raw_thresholds_[j] == s.threshold_)
                for j, s in enumerate(singles)
            ],
            "epsilon_spent": multi.epsilon_spent_,
            "epsilon_per_level": multi.epsilon_spent_per_level_.tolist(),
            "t_multi": times["one fit, 3 levels"],
            "t_three": times["3 separate fits"],
        }
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 splits")
    parser.add_argument("--n-splits", type=int, default=5)
    args = parser.parse_args()
    n_splits = 2 if args.quick else args.n_splits
    warnings.simplefilter("ignore", InfiniteThresholdWarning)
    X, y, c = load_bikeshare(return_X_y=True)
    print(
        f"Bikeshare: {X.shape[0]} rows, {np.unique(c).size} clients (months); "
        f"alpha={LEVELS}; {n_splits} splits, 40/40/20 within each client"
    )
    results = [run_split(X, y, c, seed) for seed in range(n_splits)]
    record = {}
    for name in SETTINGS:
        rows = [r[name] for r in results]
        cov = np.mean([r["coverage"] for r in rows], axis=0)
        width = np.mean([r["width"] for r in rows], axis=0)
        ratio = np.median([r["t_three"] / r["t_multi"] for r in rows])
        t_multi = np.median([r["t_multi"] for r in rows])
        t_three = np.median([r["t_three"] for r in rows])
        nested = all(r["nested"] for r in rows)
        same = all(all(r["same_as_separate"]) for r in rows)
        print(f"\n{name}: predict_interval shape {rows[0]['shape']}")
        for j, a in enumerate(LEVELS):
            print(
                f"  alpha={a:<5} target {1 - a:.2f}  coverage {cov[j]:.4f}  "
                f"mean width {width[j]:.3f}"
            )
        print(f"  nested on every test row of every split: {nested}")
        if "epsilon" not in SETTINGS[name]:
            print(f"  each level's threshold equals its separate fit's: {same}")
        eps = rows[0]["epsilon_per_level"]
        print(f"  epsilon_spent_ {rows[0]['epsilon_spent']} (per level {eps})")
        print(
            f"  time: one fit {t_multi * 1e3:.2f} ms, three fits "
            f"{t_three * 1e3:.2f} ms, ratio {ratio:.2f}x"
        )
        record[name] = {
            "coverage": cov.tolist(),
            "mean_width": width.tolist(),
            "nested": nested,
            "same_as_separate": same,
            "epsilon_spent": rows[0]["epsilon_spent"],
            "time_one_fit_s": t_multi,
            "time_three_fits_s": t_three,
            "speedup": ratio,
        }
    path = _common.save_record(
        "bench_levels", {"alpha": LEVELS, "n_splits": n_splits, "results": record}
    )
    print(f"\nrecord: {path}")


if __name__ == "__main__":
    main()
