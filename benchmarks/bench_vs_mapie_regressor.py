"""FedConformalRegressor beside MAPIE's SplitConformalRegressor, frozen model.

Issue #12, target 1: calibrate on 200k rows and predict intervals on 200k
test rows (20 features, a frozen Ridge) in <= 2.4x the model's own
``predict`` on the test rows, and faster than MAPIE 1.6
``SplitConformalRegressor(prefit=True)`` in the same run. The floor is 2.0x:
one predict on the calibration rows, one on the test rows.

Each contender runs ``fit`` (MAPIE: ``conformalize``) then
``predict_interval``; timings are the best of ``--repeat`` interleaved
rounds (every contender once per round, so all see the same background
load). The script also checks that the central calibrator gives MAPIE's
intervals to the last bit (both are split conformal with the absolute
residual and the ``ceil((n + 1)(1 - alpha))``-th smallest score).

Run: ``python benchmarks/bench_vs_mapie_regressor.py`` (``--quick``: 20k rows).
"""

import warnings

import _common
import _peers
import numpy as np
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import Ridge

from skfedcp import FedConformalRegressor

ALPHA = 0.1


def make_data(n_cal, n_test, n_features, seed=0):
    rng = np.random.default_rng(seed)
    n_train = 5_000
    n = n_train + n_cal + n_test
    X = rng.normal(size=(n, n_features))
    y = X @ rng.normal(size=n_features) + rng.standard_t(5, size=n)
    return _peers.split_blocks(X, y, n_train, n_cal)


# The floor as measured, not as counted: the two predicts any split method
# needs, in the same run (the calibration and test rows do not share the
# cache, so this is usually a little above 2.0x).
FLOOR = "floor: predict(cal) + predict(test)"


def main(argv=None):
    parser = _peers.size_parser(__doc__)
    parser.add_argument("--n-clients", type=int, default=100)
    parser.add_argument(
        "--shuffled", action="store_true", help="clients' rows interleaved"
    )
    args = _peers.parse_sizes(parser, argv)
    from mapie.regression import SplitConformalRegressor

    (X_train, X_cal, X_test), (y_train, y_cal, y_test) = make_data(
        args.n_cal, args.n_test, args.n_features
    )
    model = Ridge().fit(X_train, y_train)
    frozen = FrozenEstimator(model)
    # Equal clients, rows grouped by client (--shuffled: interleaved rows).
    client_ids = np.arange(args.n_cal) * args.n_clients // args.n_cal
    if args.shuffled:
        client_ids = np.random.default_rng(1).permutation(client_ids)

    def skfedcp(calibrator, ids):
        reg = FedConformalRegressor(frozen, alpha=ALPHA, calibrator=calibrator)
        return reg.fit(X_cal, y_cal, client_ids=ids).predict_interval(X_test)

    def mapie():
        reg = SplitConformalRegressor(model, confidence_level=1 - ALPHA, prefit=True)
        return reg.conformalize(X_cal, y_cal).predict_interval(X_test)[1][:, :, 0]

    contenders = {
        "Ridge.predict (test rows)": lambda: model.predict(X_test),
        FLOOR: lambda: (model.predict(X_cal), model.predict(X_test)),
        "skfedcp central": lambda: skfedcp("central", None),
        f"skfedcp qq, {args.n_clients} clients": lambda: skfedcp("qq", client_ids),
        "MAPIE SplitConformalRegressor": mapie,
    }

    # Agreement (outside the timed runs).
    central, qq, ref = (
        skfedcp("central", None),
        skfedcp("qq", client_ids),
        mapie(),
    )
    same = np.array_equal(central, ref)
    assert same, "central split conformal must give MAPIE's intervals exactly"
    assert central.flags.c_contiguous and qq.flags.c_contiguous
    coverage = {
        name: float(np.mean((y_test >= iv[:, 0]) & (y_test <= iv[:, 1])))
        for name, iv in (("central", central), ("qq", qq), ("mapie", ref))
    }

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wall, cpu = _peers.interleaved_best(contenders, repeat=args.repeat)
    n = args.n_clients
    goals = {
        "Ridge.predict (test rows)": "1.00x",
        FLOOR: "(floor)",
        "skfedcp central": "<= 2.4x, < MAPIE",
        f"skfedcp qq, {n} clients": "<= 2.4x, < MAPIE",
        "MAPIE SplitConformalRegressor": "(peer)",
    }
    print(
        f"\nfit + predict_interval, frozen Ridge: {args.n_cal:,} calibration + "
        f"{args.n_test:,} test rows x {args.n_features} features, "
        f"{'shuffled' if args.shuffled else 'grouped'} clients "
        f"(best of {args.repeat} interleaved rounds; floor 2.0x)"
    )
    record = _peers.print_table(wall, cpu, goals, base="Ridge.predict (test rows)")
    for name in ("skfedcp central", f"skfedcp qq, {n} clients"):
        print(_peers.versus(wall, cpu, name, "MAPIE SplitConformalRegressor"))
    print(
        f"intervals: central == MAPIE bit for bit: {same}; test coverage "
        + ", ".join(f"{k} {v:.4f}" for k, v in coverage.items())
    )
    _common.save_record(
        "vs_mapie_regressor",
        {"settings": vars(args), "results": record, "coverage": coverage},
    )


if __name__ == "__main__":
    main()
