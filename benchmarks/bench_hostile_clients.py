"""What c dishonest clients can do to the threshold, per strategy (issue 11).

Each trial draws honest scores for ``m`` clients, lets ``c`` of them collude
and send the most extreme message the server accepts (as low as possible, or
as high as possible), and measures how far the threshold moves:

* ``ranks spanned``: the rank among the honest clients' messages that the
  lowest and the highest attack put the threshold at (``+inf`` counts as one
  past the largest), and their largest difference over the trials (QQ and
  DP-QQ: theory says at most ``c``: the threshold stays between the
  ``(k - c)``-th and the ``k``-th honest value);
* ``range``: the smallest and largest attacked thresholds seen (DP-QQ stays on
  the public grid; Avg is pushed to +-1e307 and beyond).

Usage: ``python bench_hostile_clients.py [--quick]``.
"""

import argparse
import warnings

import _common  # noqa: F401  (single-threaded BLAS)
import numpy as np

from skfedcp.calibrators import (
    AveragingCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)

M, N, ALPHA = 20, 200, 0.1


def _honest(cal, rng, sizes):
    streams = rng.spawn(len(sizes))
    return np.array(
        [
            cal.client_step(
                rng.exponential(size=n) / 5.0,
                alpha=ALPHA,
                n_per_client=sizes,
                random_state=s,
            )["quantile"]
            for n, s in zip(sizes, streams, strict=True)
        ]
    )


def _attacks(name, cal, sizes):
    if name == "dp-qq":
        plan = cal.plan(sizes, ALPHA)
        edges = np.linspace(*plan["score_bounds"], plan["n_bins"] + 1)
        return float(edges[1]), np.inf  # the lowest and highest grid values
    return -1e308, 1e308


def run(n_trials, seed=0):
    sizes = [N] * M
    strategies = {
        "qq": QuantileOfQuantilesCalibrator(),
        "dp-qq": PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), n_bins=100
        ),
        "avg": AveragingCalibrator(),
    }
    rng = np.random.default_rng(seed)
    rows = []
    for name, cal in strategies.items():
        for c in (1, 2):
            shift, low, high = 0, np.inf, -np.inf
            for _ in range(n_trials):
                values = _honest(cal, rng, sizes)
                liars = rng.choice(M, size=c, replace=False)
                honest = np.sort(np.delete(values, liars))
                ranks = []
                for attack in _attacks(name, cal, sizes):
                    sent = values.copy()
                    sent[liars] = attack
                    threshold = cal.server_step(
                        [{"n": N, "quantile": v} for v in sent],
                        alpha=ALPHA,
                        n_per_client=sizes,
                    )
                    # The rank the threshold takes among the honest values,
                    # ties resolved towards the other attack (``+inf``: one
                    # past the largest).
                    side = "right" if not ranks else "left"
                    rank = int(np.searchsorted(honest, threshold, side=side))
                    ranks.append(rank if not ranks else rank + 1)
                    low, high = min(low, threshold), max(high, threshold)
                shift = max(shift, ranks[1] - ranks[0])
            bound = "unbounded" if name == "avg" else f"<= {c}"
            rows.append((name, c, shift, bound, low, high))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 trials, not 500")
    args = parser.parse_args()
    n_trials = 50 if args.quick else 500
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = run(n_trials)
    print(f"m={M} clients x n={N} rows, alpha={ALPHA}, {n_trials} trials each")
    print(f"{'strategy':<8} {'c':>2} {'ranks spanned':>14} {'theory':>10}  range")
    for name, c, shift, bound, low, high in rows:
        print(f"{name:<8} {c:>2} {shift:>14} {bound:>10}  [{low:.4g}, {high:.4g}]")


if __name__ == "__main__":
    main()
