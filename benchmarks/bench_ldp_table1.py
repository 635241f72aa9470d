"""Local-DP conformal calibration: the shape of Table 1 and Figure 6 of seed 004.

Penso et al. (2025) compare, at epsilon = 4 and alpha = 0.1 over 100 random
splits, non-private split CP with LDP-L, LDP-S and their starred variants,
for the HPS (= LAC) and APS scores on MedMNIST data sets (Table 1), and sweep
epsilon in [1, 8] (Figure 6). MedMNIST cannot be had offline; the stand-ins:

* Fashion-MNIST (k = 10): PCA(50) + standardised logistic regression trained
  on 10,000 training images and kept fixed; each split draws ``--n-cal``
  calibration users (default 30,000, between the paper's TissueMNIST and
  OCTMNIST sizes) and 20,000 test images from the other 60,000 images.
* digits (k = 10): logistic regression on 597 images; each split draws 900
  calibration users and 300 test images from the other 1,200 (a small data
  set, like the paper's Organ*MNIST, but smaller still).

Calibration users are spread over 10 clients (users are the rows; clients
only group them). delta = 0.001 (inferred from Table 1 in the spec) and
T = 10 LDP-S rounds. The model's probabilities and the score matrices are
computed once; each split then runs the calibrators themselves (what
``PrivateConformalClassifier.fit`` runs, without re-scoring the pool).

Scores: LAC (= HPS), deterministic APS and randomized APS. Deterministic APS
gives the top label of a confident model the score ``p_top``, so on
Fashion-MNIST 13% of the true-label scores lie within 2^-10 of 1, inside
the last bin of a 10-round bisection on [0, 1] (issue 14, item 3).

LDP-S rows (issue 14, items 2 and 3): ``LDP-S`` is the default
(``search="tight"``: no stopping band, the interval's upper end,
``Delta_S = c sqrt(ln(T/delta) / (2 n'))``, bisection on the logit axis
``ln(s / (1 - s))``); ``/linear`` and ``/log`` the same search on the score
itself and on ``-ln(1 - s)``; ``/band`` the previous default (linear axis,
the paper's band ``Delta_S / 2`` and ``Delta_S = 2 t_S``, upper end when no
round stops) and ``/paper`` the paper's rule (the same, but the last query
``q_T`` when no round stops, which needs an assumption on the score law).

Printed per data set and score: mean ± std over splits of coverage and set
size, the set size relative to non-private CP on the same split, the
fraction of splits with the full set (threshold +inf), and the calibration
time relative to non-private CP; then the predicted and observed LDP-L* minus
LDP-L coverage gap (Delta_L), and (``--full``) the epsilon sweep (APS on
Fashion-MNIST, as Figure 6 uses APS). The default run is short: Fashion-MNIST,
10 splits, no sweep. Run:
``python benchmarks/bench_ldp_table1.py [--quick | --full] [--splits N]``.
"""

import argparse
import sys
import time
import warnings

import _common  # noqa: F401
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp.calibrators import (
    CentralCalibrator,
    LDPLabelCalibrator,
    LDPLabelStarCalibrator,
    LDPScoreCalibrator,
    LDPScoreStarCalibrator,
    ldp_correction,
)
from skfedcp.datasets import load_fashion_mnist
from skfedcp.scores import APSScore, LACScore

ALPHA, DELTA, T, N_CLIENTS = 0.1, 0.001, 10, 10
METHODS = ["non-private", "LDP-L", "LDP-S", "LDP-L*", "LDP-S*"]
# LDP-S variants: see the module docstring.
VARIANTS = ["/linear", "/log", "/band", "/paper"]
TABLE_METHODS = [
    *METHODS,
    *(f"LDP-S{star}{v}" for star in ("", "*") for v in VARIANTS),
]
SCORES = {
    "lac": LACScore(),
    "aps": APSScore(),
    "aps-randomized": APSScore(randomized=True),
}
LDP_S_OPTIONS = {
    "": {},
    "/linear": {"axis": "linear"},
    "/log": {"axis": "log"},
    "/band": {"search": "paper", "final": "upper", "axis": "linear"},
    "/paper": {"search": "paper", "final": "paper", "axis": "linear"},
}


def make_calibrator(method, epsilon):
    kwargs = {"epsilon": epsilon, "delta": DELTA}
    if method == "non-private":
        return CentralCalibrator()
    if method.startswith("LDP-L"):
        cls = LDPLabelStarCalibrator if method.endswith("*") else LDPLabelCalibrator
        return cls(**kwargs)
    method, _, variant = method.partition("/")
    options = LDP_S_OPTIONS["/" + variant if variant else ""]
    cls = LDPScoreStarCalibrator if method.endswith("*") else LDPScoreCalibrator
    return cls(n_groups=T, score_bounds=(0.0, 1.0), **options, **kwargs)


def calibrate(method, epsilon, matrix, labels, client_ids, seed):
    """Threshold from one calibration draw, and the seconds it took."""
    cal = make_calibrator(method, epsilon)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # +inf / vacuous notes
        if method.startswith("LDP-L"):
            cal.fit(matrix, client_ids, labels=labels, alpha=ALPHA, random_state=seed)
        else:
            own = matrix[np.arange(labels.size), labels]
            cal.fit(own, client_ids, alpha=ALPHA, random_state=seed)
    return cal.threshold_, time.perf_counter() - start


def run_splits(matrix, y, n_cal, n_test, splits, epsilon, methods):
    """Coverage, size, full-set flag and time of each method on each split."""
    out = {m: {"coverage": [], "size": [], "full": [], "seconds": []} for m in methods}
    client_ids = np.arange(n_cal) % N_CLIENTS
    for split in range(splits):
        perm = np.random.default_rng(split).permutation(y.size)
        cal, test = perm[:n_cal], perm[n_cal : n_cal + n_test]
        for method in methods:
            q, seconds = calibrate(
                method, epsilon, matrix[cal], y[cal], client_ids, split
            )
            sets = matrix[test] <= q
            out[method]["coverage"].append(sets[np.arange(test.size), y[test]].mean())
            out[method]["size"].append(sets.sum(axis=1).mean())
            out[method]["full"].append(np.isinf(q))
            out[method]["seconds"].append(seconds)
    return {m: {k: np.array(v) for k, v in res.items()} for m, res in out.items()}


def print_table(res, splits):
    base_size = res["non-private"]["size"]
    base_time = res["non-private"]["seconds"].mean()
    print(
        f"{'method':>13s} {'coverage %':>15s} {'set size':>13s} "
        f"{'size/non-private':>16s} {'full sets':>9s} {'time/non-private':>16s}"
    )
    rows = []
    for method, r in res.items():
        cov, size = 100 * r["coverage"], r["size"]
        ratio = np.mean(size / base_size)
        t_ratio = r["seconds"].mean() / base_time
        print(
            f"{method:>13s} {cov.mean():7.2f} ± {cov.std():5.2f} "
            f"{size.mean():6.2f} ± {size.std():4.2f} {ratio:16.3f} "
            f"{r['full'].mean():9.2f} {t_ratio:16.1f}"
        )
        rows.append(
            {
                "method": method,
                "coverage_mean": cov.mean(),
                "coverage_std": cov.std(),
                "size_mean": size.mean(),
                "size_std": size.std(),
                "size_ratio": ratio,
                "full_set_fraction": r["full"].mean(),
                "time_ratio": t_ratio,
                "splits": splits,
            }
        )
    return rows


def load(name):
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        order = np.random.default_rng(0).permutation(y.size)
        X, y = X[order], y[order]
        model = LogisticRegression(max_iter=1000).fit(X[:597], y[:597])
        return model, X[597:], y[597:], 900, 300
    X, y, _ = load_fashion_mnist(return_X_y=True)
    model = make_pipeline(
        PCA(50, random_state=0), StandardScaler(), LogisticRegression(max_iter=1000)
    ).fit(X[:10_000], y[:10_000])
    return model, X[10_000:], y[10_000:], None, 20_000


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", type=int, default=None)
    parser.add_argument("--n-cal", type=int, default=30_000)
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument(
        "--quick", action="store_true", help="digits only, 10 splits, small sweep"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="Fashion-MNIST and digits, 100 splits, epsilon sweep",
    )
    args = parser.parse_args(argv)
    if args.quick:
        datasets, splits = ["digits"], 10
    elif args.full:
        datasets, splits = ["fashion_mnist", "digits"], 100
    else:
        datasets, splits = ["fashion_mnist"], 10
    datasets = args.datasets or datasets
    splits = args.splits or splits
    sweep_eps = [1.0, 4.0, 8.0] if args.quick else [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]
    sweep_splits = 5 if args.quick else 20
    start = time.perf_counter()
    record = {
        "alpha": ALPHA,
        "delta": DELTA,
        "n_groups": T,
        "epsilon": args.epsilon,
        "splits": splits,
        "datasets": {},
    }
    for name in datasets:
        try:
            model, X_pool, y_pool, n_cal, n_test = load(name)
        except FileNotFoundError as exc:
            print(f"{name} is missing; skipped ({exc}).")
            continue
        n_cal = n_cal or args.n_cal
        proba = model.predict_proba(X_pool)
        accuracy = float((proba.argmax(axis=1) == y_pool).mean())
        corr = ldp_correction(n_cal, 10, args.epsilon, DELTA, T)
        paper_s = ldp_correction(n_cal, 10, args.epsilon, DELTA, T, search="paper")
        print(
            f"\n=== {name}: accuracy {accuracy:.3f}, n = {n_cal} users, k = 10, "
            f"epsilon = {args.epsilon:g} (epsilon_eff = "
            f"{args.epsilon / np.sqrt(n_cal):.3f}), {splits} splits ==="
        )
        print(
            f"Delta_L = {corr.label:.4f}, Delta_S = {corr.score:.4f} (tight; "
            f"paper {paper_s.score:.4f}) (delta = {DELTA}, T = {T})"
        )
        entry = {
            "accuracy": accuracy,
            "n_cal": n_cal,
            "delta_l": corr.label,
            "delta_s": corr.score,
            "delta_s_paper": paper_s.score,
        }
        for score_name, score in SCORES.items():
            # Randomized APS: one uniform per row, fixed for the pool (each
            # row's variable is independent of everything else).
            matrix = score.label_scores(proba, random_state=0)
            res = run_splits(
                matrix, y_pool, n_cal, n_test, splits, args.epsilon, TABLE_METHODS
            )
            print(f"\nscore = {score_name}")
            rows = print_table(res, splits)
            gap = 100 * (res["LDP-L*"]["coverage"] - res["LDP-L"]["coverage"])
            print(
                f"LDP-L* - LDP-L coverage gap: {gap.mean():.2f} pp observed, "
                f"{100 * corr.label:.2f} pp predicted (Delta_L)"
            )
            entry[score_name] = {"table": rows, "l_star_gap_pp": gap.mean()}
            if (name == "fashion_mnist" and args.full) or args.quick:
                if score_name != "aps":
                    continue
                print(f"\nepsilon sweep ({score_name}, {sweep_splits} splits)")
                print(
                    f"{'epsilon':>8s} "
                    + " ".join(f"{m + ' cov/size':>20s}" for m in METHODS)
                )
                sweep = []
                for eps in sweep_eps:
                    r = run_splits(
                        matrix, y_pool, n_cal, n_test, sweep_splits, eps, METHODS
                    )
                    cells = " ".join(
                        f"{100 * r[m]['coverage'].mean():12.2f}/"
                        f"{r[m]['size'].mean():<7.2f}"
                        for m in METHODS
                    )
                    print(f"{eps:8g} {cells}")
                    sweep.append(
                        {
                            "epsilon": eps,
                            **{
                                m: {
                                    "coverage": r[m]["coverage"].mean(),
                                    "size": r[m]["size"].mean(),
                                }
                                for m in METHODS
                            },
                        }
                    )
                entry["sweep"] = sweep
        record["datasets"][name] = entry
    record["seconds"] = time.perf_counter() - start
    _common.save_record("ldp_table1" + ("_quick" if args.quick else ""), record)


if __name__ == "__main__":
    sys.exit(main())
