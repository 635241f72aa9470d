"""Private versus non-private prediction sets on Fashion-MNIST (seed 002, sec. 4.1).

The paper calibrates a CIFAR-10 CNN on n = 5,000 images at epsilon = 8 and
finds (as histograms) that private calibration raises the set size only
slightly. Offline stand-in: Fashion-MNIST with a CPU model, PCA(50) +
standardised logistic regression trained on 10,000 training images and kept
fixed (FrozenEstimator). Each split draws n = 5,000 calibration and 5,000
test images from the 10,000 test images; alpha = 0.1, LAC score (the
paper's), APS and randomized APS (deterministic APS piles scores just below
1, where the private bins cannot resolve them: expect trivial sets).
Strategies: non-private split CP, DP split CP ("dp-central", automatic bins
and gamma) and FedCP²-QQ ("dp-qq", 10 clients of 500) at epsilon in {1, 8}.

Printed: mean coverage ± SE over splits, mean set size, and the set size
relative to non-private calibration on the same split.
Needs the Debian package ``dataset-fashion-mnist``.
Run: ``python benchmarks/bench_private_fashion_mnist.py [--quick]``.
"""

import argparse
import sys
import time
import warnings

import _common  # noqa: F401
import numpy as np
from sklearn.decomposition import PCA
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp.classification import PrivateConformalClassifier
from skfedcp.datasets import load_fashion_mnist
from skfedcp.exceptions import InfiniteThresholdWarning
from skfedcp.metrics import set_coverage_score, set_size_score
from skfedcp.scores import APSScore

ALPHA = 0.1
N_CAL = 5000
SETTINGS = [
    ("central", None),
    ("dp-central", 1.0),
    ("dp-central", 8.0),
    ("dp-qq", 1.0),
    ("dp-qq", 8.0),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="10 splits, LAC only")
    args = parser.parse_args(argv)
    splits = 10 if args.quick else args.splits
    scores = {"lac": "lac"}
    if not args.quick:
        scores["aps"] = "aps"
        scores["aps randomized"] = APSScore(randomized=True)
    try:
        X, y, _ = load_fashion_mnist(return_X_y=True)
    except FileNotFoundError as exc:
        print(
            "Fashion-MNIST is missing; skipped. Install it with\n"
            "  apt-get update && apt-get install -y dataset-fashion-mnist\n"
            f"({exc})"
        )
        return
    start = time.perf_counter()
    model = make_pipeline(
        PCA(50, random_state=0), StandardScaler(), LogisticRegression(max_iter=1000)
    )
    model = FrozenEstimator(model.fit(X[:10_000], y[:10_000]))
    X_pool, y_pool = X[60_000:], y[60_000:]
    accuracy = model.score(X_pool, y_pool)
    fit_seconds = time.perf_counter() - start
    print(
        f"\nFashion-MNIST, PCA(50)+LogisticRegression on 10,000 images: accuracy "
        f"{accuracy:.3f} ({fit_seconds:.0f} s); n = {N_CAL}, alpha = {ALPHA}, "
        f"{splits} splits"
    )
    client_ids = np.repeat(np.arange(10), N_CAL // 10)
    record = {"alpha": ALPHA, "n": N_CAL, "splits": splits, "accuracy": accuracy}
    for score_name, score in scores.items():
        res = {s: {"coverage": [], "size": []} for s in SETTINGS}
        for split in range(splits):
            perm = np.random.default_rng(split).permutation(len(y_pool))
            cal, test = perm[:N_CAL], perm[N_CAL:]
            for calibrator, eps in SETTINGS:
                clf = PrivateConformalClassifier(
                    model,
                    alpha=ALPHA,
                    epsilon=eps,
                    calibrator=calibrator,
                    conformity_score=score,
                    random_state=split,
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", InfiniteThresholdWarning)
                    clf.fit(X_pool[cal], y_pool[cal], client_ids=client_ids)
                sets = clf.predict_set(X_pool[test])
                res[calibrator, eps]["coverage"].append(
                    set_coverage_score(y_pool[test], sets)
                )
                res[calibrator, eps]["size"].append(set_size_score(sets))
        base = np.array(res["central", None]["size"])
        print(f"\nscore = {score_name}")
        header = f"{'method':>18s} {'coverage':>17s} {'set size':>9s}"
        print(f"{header} {'size / non-private':>19s}")
        rows = []
        for (calibrator, eps), values in res.items():
            cov, size = np.array(values["coverage"]), np.array(values["size"])
            se = cov.std(ddof=1) / np.sqrt(splits)
            name = calibrator if eps is None else f"{calibrator} eps={eps:g}"
            ratio = np.mean(size / base)
            print(
                f"{name:>18s} {cov.mean():8.4f} ± {se:.4f} {size.mean():9.3f} "
                f"{ratio:19.3f}"
            )
            rows.append(
                {
                    "method": name,
                    "coverage": cov.mean(),
                    "coverage_se": se,
                    "size": size.mean(),
                    "size_ratio": ratio,
                }
            )
        record[score_name] = rows
    record["seconds"] = time.perf_counter() - start
    _common.save_record("private_fashion_mnist", record)


if __name__ == "__main__":
    sys.exit(main())
