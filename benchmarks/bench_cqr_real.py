"""Federated CQR on real tables with natural clients: central vs QQ vs Avg.

Protocol (section 5.2 of Humbert et al. 2023, with the tables' own clients
instead of an even cut): in each of ``--n-splits`` random splits, every
client's rows are split 40% train / 40% calibration / 20% test; a quantile
regression forest is fitted on the pooled training rows and frozen; the
symmetric CQR score is calibrated across the clients' calibration rows with
central split CP, QQ and Avg (alpha = 0.1); coverage and mean length are
measured on the pooled test rows. Clients have unequal sizes, so QQ uses the
per-client ranks of Appendix A.1 (``local_rank="auto"`` falls back to them).

Three federations run side by side on the same forest: the ``natural``
clients; ``natural/10``, where each natural client's calibration rows are cut
at random into sub-clients of 10 to 19 rows (departments of a hospital, say),
the small-client regime of the paper's figures (m >> n); and ``shuffled``, the
natural client sizes with rows assigned to clients at random, a control in
which the clients' score laws agree, as the QQ guarantee assumes.

The paper's conclusion is checked per table and federation: QQ ~ central
(coverage within 0.01, mean length within 5%) and Avg wider (mean length
ratio > 1.02). Natural clients differ in their score laws, so the i.i.d.
assumption behind the QQ guarantee is only approximate here (see
Proposition 3.4 of the paper).

Run: ``python benchmarks/bench_cqr_real.py`` (``--quick``: 3 splits, 50
trees, bikeshare and star).
"""

import argparse
import time

import _common  # noqa: F401
import numpy as np
import pandas as pd
from quantile_forest import RandomForestQuantileRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp import datasets
from skfedcp.metrics import coverage_score, max_coverage_gap, mean_width_score
from skfedcp.regression import FedCQRRegressor

LOADERS = {
    "bikeshare": (datasets.load_bikeshare, "12 months"),
    "star": (datasets.load_star, "79 schools"),
    "randhie": (datasets.load_randhie, "6 sites"),
}
CALIBRATORS = ["central", "qq", "avg"]
SUB_CLIENT_SIZE = 10


def sub_clients(client_ids, rng, size=SUB_CLIENT_SIZE):
    """Cut each client's rows at random into groups of ``size`` (last one larger)."""
    out = np.empty(client_ids.shape[0], dtype=np.int64)
    for j, c in enumerate(np.unique(client_ids)):
        rows = rng.permutation(np.flatnonzero(client_ids == c))
        n_groups = max(1, len(rows) // size)
        out[rows] = j * 10_000 + np.minimum(np.arange(len(rows)) // size, n_groups - 1)
    return out


def split_within_clients(client_ids, rng, fractions=(0.4, 0.4, 0.2)):
    part = np.empty(client_ids.shape[0], dtype=np.int8)
    for c in np.unique(client_ids):
        rows = rng.permutation(np.flatnonzero(client_ids == c))
        cut1 = int(round(fractions[0] * len(rows)))
        cut2 = cut1 + int(round(fractions[1] * len(rows)))
        part[rows[:cut1]], part[rows[cut1:cut2]], part[rows[cut2:]] = 0, 1, 2
    return part == 0, part == 1, part == 2


def run(dataset, args):
    X, y, ids = LOADERS[dataset][0](return_X_y=True)
    rows = []
    for split in range(args.n_splits):
        rng = np.random.default_rng(split)
        train, cal, test = split_within_clients(ids, rng)
        forest = RandomForestQuantileRegressor(
            n_estimators=args.n_trees,
            min_samples_leaf=5,
            max_features=1 / 3,
            random_state=split,
        ).fit(X[train], y[train])
        federations = {
            "natural": ids[cal],
            f"natural/{SUB_CLIENT_SIZE}": sub_clients(ids[cal], rng),
            "shuffled": rng.permutation(ids[cal]),
        }
        for federation, cal_ids in federations.items():
            for name in CALIBRATORS:
                reg = FedCQRRegressor(
                    FrozenEstimator(forest), alpha=args.alpha, calibrator=name
                ).fit(X[cal], y[cal], client_ids=cal_ids)
                iv = reg.predict_interval(X[test])
                rows.append(
                    {
                        "dataset": dataset,
                        "federation": federation,
                        "n_clients": reg.n_clients_,
                        "split": split,
                        "calibrator": name,
                        "threshold": float(reg.threshold_),
                        "coverage": coverage_score(y[test], iv),
                        "length": mean_width_score(iv),
                        "worst_client_gap": max_coverage_gap(
                            y[test], iv, ids[test], alpha=args.alpha
                        ),
                    }
                )
    sizes = np.unique(ids[cal], return_counts=True)[1]
    return pd.DataFrame(rows), sizes


def summarize(df):
    out = df.groupby("calibrator", sort=False).agg(
        n_clients=("n_clients", "mean"),
        coverage_mean=("coverage", "mean"),
        coverage_sd=("coverage", "std"),
        length_mean=("length", "mean"),
        length_sd=("length", "std"),
        worst_client_gap=("worst_client_gap", "mean"),
    )
    central = df[df.calibrator == "central"].set_index("split")["length"]
    ratio = df.assign(ratio=df["length"] / df["split"].map(central))
    out["length_vs_central"] = ratio.groupby("calibrator", sort=False)["ratio"].mean()
    return out


def verdict(summary):
    qq, central, avg = (summary.loc[c] for c in ("qq", "central", "avg"))
    close = (
        abs(qq.coverage_mean - central.coverage_mean) <= 0.01
        and abs(qq.length_vs_central - 1) <= 0.05
    )
    ratio = avg.length_vs_central
    wider = "yes" if ratio > 1.02 else ("NO, ~ central" if ratio >= 0.98 else "NO")
    return (
        f"QQ ~ central: {'yes' if close else 'NO'} (coverage "
        f"{qq.coverage_mean - central.coverage_mean:+.4f}, length ratio "
        f"{qq.length_vs_central:.3f}); Avg wider (> 2%): {wider} "
        f"(length ratio {ratio:.3f})"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="+", default=list(LOADERS))
    parser.add_argument("--n-splits", type=int, default=20)
    parser.add_argument("--n-trees", type=int, default=100)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_splits, args.n_trees = 3, 50
        args.datasets = ["bikeshare", "star"]
    record = {"settings": vars(args), "tables": {}}
    for dataset in args.datasets:
        start = time.perf_counter()
        df, sizes = run(dataset, args)
        wall = time.perf_counter() - start
        print(
            f"\n{dataset}: {LOADERS[dataset][1]}, calibration rows per client "
            f"{sizes.min()}-{sizes.max()} ({sizes.sum()} in all), quantile forest "
            f"({args.n_trees} trees), {args.n_splits} splits, alpha={args.alpha}, "
            f"{wall:.0f} s"
        )
        record["tables"][dataset] = {
            "wall_time_s": wall,
            "calibration_sizes": sizes.tolist(),
            "rows": df.to_dict("records"),
        }
        for federation, part in df.groupby("federation", sort=False):
            summary = summarize(part)
            record["tables"][dataset][federation] = summary.reset_index().to_dict(
                "records"
            )
            print(f"-- {federation} clients ({summary['n_clients'].iloc[0]:.0f})")
            print(_table(summary).to_string())
            print(verdict(summary))
    _common.save_record("cqr_real", record)


def _table(summary):
    return pd.DataFrame(
        {
            "coverage (mean ± sd)": [
                f"{r.coverage_mean:.4f} ± {r.coverage_sd:.4f}"
                for r in summary.itertuples()
            ],
            "length (mean ± sd)": [
                f"{r.length_mean:.3f} ± {r.length_sd:.3f}" for r in summary.itertuples()
            ],
            "length / central": summary["length_vs_central"]
            .map("{:.3f}".format)
            .values,
            "worst client gap": summary["worst_client_gap"].map("{:.3f}".format).values,
        },
        index=summary.index,
    )


if __name__ == "__main__":
    main()
