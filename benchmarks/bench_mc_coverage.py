"""Monte Carlo coverage of QQ (vs its exact M), central and Avg on synthetic scores.

Exponential scores; each repetition's coverage is the exact conditional
coverage ``1 - exp(-q)`` of its threshold. Prints mean coverage ± standard
error for each strategy beside the exact ``M(l*, k*)``.
Run: ``python benchmarks/bench_mc_coverage.py``.
"""

import argparse

import _common  # noqa: F401
import numpy as np

from skfedcp.calibrators import get_calibrator

SETTINGS = [(5, 10), (10, 20), (20, 10), (50, 20), (100, 10), (10, 100)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true", help="500 repetitions")
    args = parser.parse_args(argv)
    reps = 500 if args.quick else args.reps
    alpha = args.alpha
    print(
        f"\nMonte Carlo coverage, {reps} repetitions, alpha={alpha} "
        "(mean ± 1 SE; exact M for QQ)"
    )
    print(
        f"{'(m, n)':>10s} {'M(l*,k*)':>9s} {'qq':>17s} {'central':>17s} "
        f"{'avg':>17s} {'qq-M in SE':>10s}"
    )
    record = []
    for m, n in SETTINGS:
        ids = np.repeat(np.arange(m), n)
        rng = np.random.default_rng(0)
        cals = {name: get_calibrator(name) for name in ["qq", "central", "avg"]}
        cov = {name: np.empty(reps) for name in cals}
        for r in range(reps):
            scores = rng.exponential(size=m * n)
            for name, cal in cals.items():
                cov[name][r] = 1 - np.exp(-cal.fit(scores, ids, alpha=alpha).threshold_)
        M = cals["qq"].calibration_info_["coverage"]
        stats = {k: (v.mean(), v.std(ddof=1) / np.sqrt(reps)) for k, v in cov.items()}
        z = (stats["qq"][0] - M) / stats["qq"][1]
        cells = " ".join(f"{mu:.4f} ± {se:.4f}" for mu, se in stats.values())
        print(f"{str((m, n)):>10s} {M:9.5f} {cells} {z:10.2f}")
        record.append({"m": m, "n": n, "M": M, **{k: v[0] for k, v in stats.items()}})
    _common.save_record("mc_coverage", {"reps": reps, "alpha": alpha, "rows": record})


if __name__ == "__main__":
    main()
