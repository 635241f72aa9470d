"""PrivateConformalClassifier beside MAPIE's SplitConformalClassifier (LAC).

Issue #12, target 1 (classification): with a frozen LogisticRegression,
calibrate on 200k rows and predict LAC sets on 200k test rows (20 features,
10 classes) faster than MAPIE 1.6 ``SplitConformalClassifier(prefit=True)`` in
the same run. Ratios are to the model's own ``predict_proba`` on the test
rows; the floor is 2.0x (``predict_proba`` on the calibration rows, then on
the test rows).

Timings are the best of ``--repeat`` interleaved rounds (every contender once
per round). ``calibrator="central"`` is the non-private split conformal
MAPIE implements, and the script checks that its sets are MAPIE's (MAPIE's
``predict_set`` also returns the point predictions, which skfedcp's does not;
they cost one ``argmax`` of the probabilities). ``"dp-central"`` (the
default, epsilon = 1) is shown for the price of privacy.

Run: ``python benchmarks/bench_vs_mapie_classifier.py`` (``--quick``: 20k rows).
"""

import warnings

import _common
import _peers
import numpy as np
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression

from skfedcp import PrivateConformalClassifier

ALPHA = 0.1


def make_data(n_cal, n_test, n_features, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    n_train = 5_000
    n = n_train + n_cal + n_test
    centers = rng.normal(scale=0.6, size=(n_classes, n_features))
    y = rng.integers(n_classes, size=n)
    X = centers[y] + rng.normal(size=(n, n_features))
    return _peers.split_blocks(X, y, n_train, n_cal)


def main(argv=None):
    parser = _peers.size_parser(__doc__)
    parser.add_argument("--n-classes", type=int, default=10)
    args = _peers.parse_sizes(parser, argv)
    from mapie.classification import SplitConformalClassifier

    (X_train, X_cal, X_test), (y_train, y_cal, y_test) = make_data(
        args.n_cal, args.n_test, args.n_features, args.n_classes
    )
    model = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    frozen = FrozenEstimator(model)

    def skfedcp(calibrator):
        clf = PrivateConformalClassifier(
            frozen, alpha=ALPHA, calibrator=calibrator, epsilon=1.0, random_state=0
        )
        return clf.fit(X_cal, y_cal).predict_set(X_test)

    def mapie():
        clf = SplitConformalClassifier(
            model, confidence_level=1 - ALPHA, conformity_score="lac", prefit=True
        )
        return clf.conformalize(X_cal, y_cal).predict_set(X_test)[1][:, :, 0]

    contenders = {
        "LogisticRegression.predict_proba": lambda: model.predict_proba(X_test),
        "skfedcp LAC, central": lambda: skfedcp("central"),
        "skfedcp LAC, dp-central (eps=1)": lambda: skfedcp("dp-central"),
        "MAPIE SplitConformalClassifier": mapie,
    }

    # Agreement (outside the timed runs).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, ref = skfedcp("central"), mapie()
        same = bool(np.array_equal(ours, ref))
        assert same, "central LAC must give MAPIE's prediction sets"
        coverage = float(ours[np.arange(y_test.shape[0]), y_test].mean())
        dp = skfedcp("dp-central")
        dp_coverage = float(dp[np.arange(y_test.shape[0]), y_test].mean())
        wall, cpu = _peers.interleaved_best(contenders, repeat=args.repeat)

    print(
        f"\nLAC fit + predict_set, frozen LogisticRegression: {args.n_cal:,} "
        f"calibration + {args.n_test:,} test rows x {args.n_features} features, "
        f"{args.n_classes} classes (best of {args.repeat} interleaved rounds; "
        "floor 2.0x)"
    )
    goals = {
        "LogisticRegression.predict_proba": "1.00x",
        "skfedcp LAC, central": "< MAPIE",
        "skfedcp LAC, dp-central (eps=1)": "(private)",
        "MAPIE SplitConformalClassifier": "(peer)",
    }
    record = _peers.print_table(
        wall, cpu, goals, base="LogisticRegression.predict_proba"
    )
    print(
        _peers.versus(
            wall, cpu, "skfedcp LAC, central", "MAPIE SplitConformalClassifier"
        )
    )
    print(
        f"sets: central == MAPIE: {same}; test coverage central {coverage:.4f}, "
        f"dp-central {dp_coverage:.4f}"
    )
    _common.save_record(
        "vs_mapie_classifier",
        {"settings": vars(args), "results": record, "coverage": coverage},
    )


if __name__ == "__main__":
    main()
