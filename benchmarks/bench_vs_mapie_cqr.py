"""FedCQRRegressor beside MAPIE's ConformalizedQuantileRegressor, frozen models.

Issue #12, target 1 (CQR): with a frozen pair of linear quantile models,
calibrate on 200k rows and predict intervals on 200k test rows (20
features) faster than MAPIE 1.6 ``ConformalizedQuantileRegressor(prefit=True)``
in the same run. Ratios are to the pair's own ``predict`` on the test rows
(lower + upper model): our floor is 2.0x (the pair on the calibration rows,
then on the test rows). MAPIE's prefit form also takes a median model and
predicts with all three, so its floor is 3.0x.

Timings are the best of ``--repeat`` interleaved rounds (every contender once
per round). The script checks that the central calibrator gives MAPIE's
bounds to the last bit, for the symmetric score (MAPIE
``symmetric_correction=True``) and the asymmetric one (MAPIE's default), on
the rows where the bounds do not cross (skfedcp returns crossed bounds as
``[min, max]``, MAPIE as they are).

Run: ``python benchmarks/bench_vs_mapie_cqr.py`` (``--quick``: 20k rows).
"""

import warnings

import _common
import _peers
import numpy as np
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import QuantileRegressor

from skfedcp import FedCQRRegressor

ALPHA = 0.1


def make_data(n_cal, n_test, n_features, seed=0):
    rng = np.random.default_rng(seed)
    n_train = 2_000
    n = n_train + n_cal + n_test
    X = rng.normal(size=(n, n_features))
    scale = 1.0 + np.abs(X[:, 0])  # heteroscedastic: CQR's use case
    y = X @ rng.normal(size=n_features) + scale * rng.normal(size=n)
    return _peers.split_blocks(X, y, n_train, n_cal)


def quantile_model(level, X, y):
    return QuantileRegressor(quantile=level, alpha=0.0, solver="highs").fit(X, y)


def main(argv=None):
    parser = _peers.size_parser(__doc__)
    parser.add_argument("--n-clients", type=int, default=100)
    args = _peers.parse_sizes(parser, argv)
    from mapie.regression import ConformalizedQuantileRegressor

    (X_train, X_cal, X_test), (y_train, y_cal, y_test) = make_data(
        args.n_cal, args.n_test, args.n_features
    )
    lower, upper, median = (
        quantile_model(level, X_train, y_train)
        for level in (ALPHA / 2, 1 - ALPHA / 2, 0.5)
    )
    frozen = {
        "estimator_lower": FrozenEstimator(lower),
        "estimator_upper": FrozenEstimator(upper),
    }
    client_ids = np.arange(args.n_cal) * args.n_clients // args.n_cal

    def skfedcp(calibrator, ids, score="symmetric"):
        reg = FedCQRRegressor(
            **frozen, alpha=ALPHA, calibrator=calibrator, conformity_score=score
        )
        return reg.fit(X_cal, y_cal, client_ids=ids).predict_interval(X_test)

    def mapie(symmetric=True):
        reg = ConformalizedQuantileRegressor(
            [lower, upper, median], confidence_level=1 - ALPHA, prefit=True
        )
        reg.conformalize(X_cal, y_cal)
        return reg.predict_interval(X_test, symmetric_correction=symmetric)[1][:, :, 0]

    def pair_predict():
        return lower.predict(X_test), upper.predict(X_test)

    n = args.n_clients
    contenders = {
        "pair predict (test rows)": pair_predict,
        "skfedcp symmetric, central": lambda: skfedcp("central", None),
        f"skfedcp symmetric, qq {n} clients": lambda: skfedcp("qq", client_ids),
        "MAPIE symmetric_correction=True": mapie,
        "skfedcp asymmetric, central": lambda: skfedcp("central", None, "asymmetric"),
        "MAPIE default (asymmetric)": lambda: mapie(symmetric=False),
    }

    # Agreement (outside the timed runs).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MAPIE's warnings on crossing bounds
        checks = {}
        for score, symmetric in (("symmetric", True), ("asymmetric", False)):
            ours, ref = skfedcp("central", None, score), mapie(symmetric)
            ok = ref[:, 0] <= ref[:, 1]
            checks[score] = bool(np.array_equal(ours[ok], ref[ok]))
            assert checks[score], f"{score}: central CQR must give MAPIE's bounds"
            assert ours.flags.c_contiguous
        qq = skfedcp("qq", client_ids)
        coverage = float(np.mean((y_test >= qq[:, 0]) & (y_test <= qq[:, 1])))
        wall, cpu = _peers.interleaved_best(contenders, repeat=args.repeat)

    print(
        f"\nCQR fit + predict_interval, frozen QuantileRegressor pair: "
        f"{args.n_cal:,} calibration + {args.n_test:,} test rows x "
        f"{args.n_features} features (best of {args.repeat} interleaved rounds; "
        "floor 2.0x, MAPIE's 3.0x with its median model)"
    )
    goals = dict.fromkeys(contenders, "< MAPIE")
    goals["pair predict (test rows)"] = "1.00x"
    goals["MAPIE symmetric_correction=True"] = "(peer)"
    goals["MAPIE default (asymmetric)"] = "(peer)"
    record = _peers.print_table(wall, cpu, goals, base="pair predict (test rows)")
    for ours, peer in (
        ("skfedcp symmetric, central", "MAPIE symmetric_correction=True"),
        (f"skfedcp symmetric, qq {n} clients", "MAPIE symmetric_correction=True"),
        ("skfedcp asymmetric, central", "MAPIE default (asymmetric)"),
    ):
        print(_peers.versus(wall, cpu, ours, peer))
    print(
        "bounds: central == MAPIE bit for bit where uncrossed: "
        + ", ".join(f"{k} {v}" for k, v in checks.items())
        + f"; qq test coverage {coverage:.4f}"
    )
    _common.save_record(
        "vs_mapie_cqr",
        {"settings": vars(args), "results": record, "agreement": checks},
    )


if __name__ == "__main__":
    main()
