"""Calibration of 10^6 precomputed scores over 1,000 clients vs one np.partition.

Issue target: QQ calibration <= 1.3x the time of a single ``np.partition`` split
CP on the same scores. Prints a table of ratios (machines are noisy: compare
ratios, not seconds). Run: ``python benchmarks/bench_calibration_speed.py``.
"""

import argparse

import _common  # noqa: F401  (sets single-threaded BLAS before numpy loads)
import numpy as np

from skfedcp.calibrators import (
    AveragingCalibrator,
    CentralCalibrator,
    QuantileOfQuantilesCalibrator,
    select_qq_ranks,
)
from skfedcp.calibrators._order_statistics import local_order_statistics
from skfedcp.federated import ClientPartition
from skfedcp.utils import conformal_rank


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-scores", type=int, default=10**6)
    parser.add_argument("--n-clients", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true", help="10^5 scores")
    args = parser.parse_args(argv)
    n, m, alpha = args.n_scores, args.n_clients, args.alpha
    if args.quick:
        n = 10**5
    rng = np.random.default_rng(0)
    scores = rng.exponential(size=n)
    grouped_ids = np.repeat(np.arange(m), n // m)
    shuffled_ids = rng.permutation(grouped_ids)
    rank = conformal_rank(n, alpha)

    def split_cp():
        return np.partition(scores, rank - 1)[rank - 1]

    # Warm the (sizes, alpha) cache: ranks are public and computed once.
    sel = select_qq_ranks((n // m,) * m, alpha)
    partition = ClientPartition(grouped_ids)

    def qq_arithmetic():
        # What the protocol itself computes (every client's order statistic,
        # then the server's k-th smallest), on validated, grouped input: the
        # like-for-like counterpart of the bare np.partition reference.
        values = local_order_statistics(partition, sel.local_ranks, scores=scores)
        return np.partition(values, sel.k - 1)[sel.k - 1]

    cases = {
        "np.partition split CP (reference)": split_cp,
        "qq arithmetic only (client + server steps)": qq_arithmetic,
        "qq, rows grouped by client": lambda: QuantileOfQuantilesCalibrator().fit(
            scores, grouped_ids, alpha=alpha
        ),
        "qq, rows shuffled": lambda: QuantileOfQuantilesCalibrator().fit(
            scores, shuffled_ids, alpha=alpha
        ),
        "avg, rows grouped by client": lambda: AveragingCalibrator().fit(
            scores, grouped_ids, alpha=alpha
        ),
        "central, rows grouped by client": lambda: CentralCalibrator().fit(
            scores, grouped_ids, alpha=alpha
        ),
    }
    times = _common.compare_times(cases)
    ref = times["np.partition split CP (reference)"]
    print(f"\nCalibration of {n:,} scores over {m:,} clients (alpha={alpha})")
    print(f"{'case':40s} {'ms':>9s} {'ratio':>7s}")
    for name, t in times.items():
        print(f"{name:40s} {t * 1e3:9.2f} {t / ref:7.2f}x")
    print("target: qq <= 1.30x. 'fit' rows include input validation (finiteness,")
    print("client labels), which the bare np.partition reference does not do.")
    _common.save_record(
        "calibration_speed",
        {
            "n_scores": n,
            "n_clients": m,
            "alpha": alpha,
            "seconds": times,
            "ratios": {k: v / ref for k, v in times.items()},
        },
    )


if __name__ == "__main__":
    main()
