"""Marginal vs group-conditional calibration on real clients, side by side.

Contenders, all on the same score arrays of each split:

* marginal: ``central`` (pooled split CP), ``qq`` (FedCP-QQ, default plan) and
  ``fcp`` (Lu et al., ICML 2023: pooled scores, rank ceil((1-alpha)(N+K)), K
  clients);
* ``mondrian``: the centralized anchor, Mondrian split CP on the pooled rows
  (per group, rank ceil((1-alpha)(N_g+1)); crepes' MondrianCategorizer
  computes the same quantile: crepes is used when importable, otherwise this
  re-implementation, said in the output);
* group-conditional, one round (skfedcp's ``group_by``):
  ``group-central``, ``group-qq``, ``group-avg``.

Data (alpha = 0.1; groups stated per table):

* STAR (79 schools), groups = school location (inner-city, rural, suburban,
  urban); Bikeshare (12 months), groups = hour of day in 5 bins; RandHIE (6
  sites), groups = self-rated health (excellent, good, fair, poor). Each set
  also with groups = the clients themselves (``star-school``,
  ``bikeshare-month``, ``randhie-site``: group-qq is per-client split CP), and
  STAR / Bikeshare with the rows of each covariate group handed to the
  clients at random, per split, cell sizes kept (``-shuffled``: the clients
  then differ only in their group mix, which separates heterogeneity within
  a group from the plan). Every
  client's rows are split 40% train / 40% calibration / 20% test per split;
  a ridge model is fitted on the pooled training rows; the score is the
  absolute residual.
* Fashion-MNIST over 100 clients by Dirichlet(0.5) label skew, groups = the
  class (class-conditional sets). A fixed model (PCA(50) + logistic
  regression on 10,000 training images) scores the other 60,000 images once;
  each split redraws every client's 50/50 calibration / test split. LAC
  score ``1 - p_y``. Digits with 20 clients when the Debian package
  dataset-fashion-mnist is not installed (said in the output).

Per dataset and contender: the worst group's and the worst client's mean
coverage over the splits with their standard errors (sd / sqrt(splits)), the
number of clients whose mean coverage is below 0.85 (Fashion-MNIST: clients
with >= 50 test rows per split on average), and the mean width (set size)
relative to the Mondrian anchor; then, from these numbers, whether each
group-conditional contender covers every group of a table and of its
``-shuffled`` twin (see :func:`findings`). group-central (like Mondrian)
needs the rows of a group exchangeable once pooled; group-qq and group-avg
need the scores of a group exchangeable across clients (the clients
differing only in their group mix), which the ``-shuffled`` tables make
true and the groups = the clients tables hold by construction. Run:
``python benchmarks/bench_heterogeneous.py [--n-splits 200] [--quick]``.
"""

import argparse
import math
import warnings

import _common
import numpy as np
import pandas as pd
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp import datasets
from skfedcp.calibrators import (
    CentralCalibrator,
    GroupedCalibrator,
    QuantileOfQuantilesCalibrator,
)
from skfedcp.exceptions import SmallCalibrationSetWarning

ALPHA = 0.1
HOUR_BINS = {
    "night 0-6": range(0, 7),
    "peak 7-9": range(7, 10),
    "day 10-15": range(10, 16),
    "peak 16-19": range(16, 20),
    "late 20-23": range(20, 24),
}


# -- groups of the tabular sets ----------------------------------------------


def star_groups(frame, ids):
    cols = ["schoolk_inner-city", "schoolk_rural", "schoolk_suburban", "schoolk_urban"]
    return np.array([c.removeprefix("schoolk_") for c in cols])[
        frame[cols].to_numpy().argmax(1)
    ]


def bikeshare_groups(frame, ids):
    hour = frame[[f"hr_{h}" for h in range(24)]].to_numpy().argmax(1)
    out = np.empty(hour.shape[0], dtype=object)
    for name, hours in HOUR_BINS.items():
        out[np.isin(hour, list(hours))] = name
    return out.astype(str)


def randhie_groups(frame, ids):
    health = frame[["hlthg", "hlthf", "hlthp"]].to_numpy()
    names = np.array(["good", "fair", "poor"])
    return np.where(health.any(1), names[health.argmax(1)], "excellent")


def client_groups(frame, ids):
    return np.asarray(ids)


# name: (loader, grouper, description of the groups, shuffle). With shuffle,
# every split first hands the rows of each group to the clients at random (the
# same number of rows per (client, group) cell): the clients then differ only
# in their group mix, the assumption group-conditional strategies need.
TABULAR = {
    "star": (datasets.load_star, star_groups, "school location", False),
    "star-school": (datasets.load_star, client_groups, "the school (client)", False),
    "star-shuffled": (
        datasets.load_star,
        star_groups,
        "school location, rows shuffled across schools within a location",
        True,
    ),
    "bikeshare": (
        datasets.load_bikeshare,
        bikeshare_groups,
        "hour of day, 5 bins",
        False,
    ),
    "bikeshare-month": (
        datasets.load_bikeshare,
        client_groups,
        "the month (client)",
        False,
    ),
    "bikeshare-shuffled": (
        datasets.load_bikeshare,
        bikeshare_groups,
        "hour of day, 5 bins, rows shuffled across months within a bin",
        True,
    ),
    "randhie": (datasets.load_randhie, randhie_groups, "self-rated health", False),
    "randhie-site": (
        datasets.load_randhie,
        client_groups,
        "the site (client)",
        False,
    ),
}


# -- the contenders: one threshold per group ---------------------------------


def _mondrian_numpy(scores, groups, labels, alpha):
    out = np.full(labels.shape[0], np.inf)
    for i, g in enumerate(labels):
        s = np.sort(scores[groups == g])
        rank = math.ceil((1 - alpha) * (s.size + 1))
        if rank <= s.size:
            out[i] = s[rank - 1]
    return out


def _mondrian_crepes(scores, groups, labels, alpha):
    from crepes import ConformalRegressor

    out = np.full(labels.shape[0], np.inf)
    for i, g in enumerate(labels):
        rows = groups == g
        cr = ConformalRegressor().fit(scores[rows])
        # crepes' interval half-width is its conformal quantile of the scores.
        low, high = cr.predict_int(np.zeros(1), confidence=1 - alpha)[0]
        out[i] = (high - low) / 2
    return out


try:  # the real thing when installed (not a dependency of skfedcp)
    import crepes  # noqa: F401

    MONDRIAN, MONDRIAN_SOURCE = _mondrian_crepes, "crepes"
except ImportError:
    MONDRIAN, MONDRIAN_SOURCE = _mondrian_numpy, "re-implemented (crepes absent)"


def fcp_threshold(scores, n_clients, alpha):
    """Lu et al. (2023): the ceil((1-alpha)(N+K))-th smallest pooled score."""
    rank = math.ceil((1 - alpha) * (scores.size + n_clients))
    return np.inf if rank > scores.size else np.partition(scores, rank - 1)[rank - 1]


def contenders(scores, clients, groups, labels, alpha=ALPHA):
    """``{name: threshold per group (aligned with labels)}``."""
    G = labels.shape[0]
    out = {
        "central": np.full(G, CentralCalibrator().fit(scores, alpha=alpha).threshold_),
        "qq": np.full(
            G,
            QuantileOfQuantilesCalibrator()
            .fit(scores, clients, alpha=alpha)
            .threshold_,
        ),
        "fcp": np.full(G, fcp_threshold(scores, np.unique(clients).size, alpha)),
        "mondrian": MONDRIAN(scores, groups, labels, alpha),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallCalibrationSetWarning)
        for name in ("central", "qq", "avg"):
            cal = GroupedCalibrator(name).fit(
                scores, clients, group_ids=groups, alpha=alpha, known_groups=labels
            )
            out[f"group-{name}"] = cal.threshold_[
                pd.Index(cal.groups_).get_indexer(labels)
            ]
    return out


# -- one split's measures ----------------------------------------------------


def measure(hit, size, groups, clients, labels, client_labels):
    """Per-group and per-client coverage (nan where no test row), mean size.

    The size is averaged over the rows whose set is finite; the share of
    infinite sets is returned beside it.
    """
    cov_g = np.array(
        [hit[groups == g].mean() if (groups == g).any() else np.nan for g in labels]
    )
    cov_c = np.array(
        [
            hit[clients == c].mean() if (clients == c).any() else np.nan
            for c in client_labels
        ]
    )
    finite = np.isfinite(size)
    return cov_g, cov_c, float(np.mean(size[finite])), float(1 - finite.mean())


def split_within_clients(client_ids, rng, fractions):
    part = np.empty(client_ids.shape[0], dtype=np.int8)
    for c in np.unique(client_ids):
        rows = rng.permutation(np.flatnonzero(client_ids == c))
        cuts = np.round(np.cumsum(fractions)[:-1] * rows.size).astype(int)
        for k, chunk in enumerate(np.split(rows, cuts)):
            part[chunk] = k
    return [part == k for k in range(len(fractions))]


def shuffle_within_groups(ids, groups, rng):
    """Client ids permuted among the rows of each group (cell counts kept)."""
    out = ids.copy()
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        out[rows] = ids[rng.permutation(rows)]
    return out


def run_tabular(name, n_splits):
    loader, grouper, group_desc, shuffle = TABULAR[name]
    bunch = loader(as_frame=True)
    X, y = bunch.data.to_numpy(dtype=float), bunch.target.to_numpy(dtype=float)
    true_ids = np.asarray(bunch.client_ids)
    groups = np.asarray(grouper(bunch.data, true_ids))
    labels, client_labels = np.unique(groups), np.unique(true_ids)
    records = []
    for split in range(n_splits):
        rng = np.random.default_rng(split)
        ids = shuffle_within_groups(true_ids, groups, rng) if shuffle else true_ids
        train, cal, test = split_within_clients(ids, rng, (0.4, 0.4, 0.2))
        model = make_pipeline(StandardScaler(), RidgeCV(np.logspace(-3, 3, 13)))
        model.fit(X[train], y[train])
        s_cal = np.abs(y[cal] - model.predict(X[cal]))
        s_test = np.abs(y[test] - model.predict(X[test]))
        gidx = pd.Index(labels).get_indexer(groups[test])
        n_cal = np.array([(groups[cal] == g).sum() for g in labels])
        for cname, thr in contenders(s_cal, ids[cal], groups[cal], labels).items():
            t = thr[gidx]
            records.append(
                (
                    cname,
                    *measure(
                        s_test <= t,
                        2 * t,
                        groups[test],
                        ids[test],
                        labels,
                        client_labels,
                    ),
                    n_cal,
                )
            )
    return summarize(records, labels, client_labels, group_desc, n_splits)


def _federation(quick):
    """Scores of a fixed model on the calibration pool, and its 100 clients."""
    try:
        bunch = datasets.load_fashion_mnist()
        X, y, source, m = bunch.data, bunch.target, "Fashion-MNIST", 100
    except (FileNotFoundError, OSError, ValueError):
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        source, m = "digits (dataset-fashion-mnist not installed)", 20
    rng = np.random.default_rng(0)
    order = rng.permutation(y.shape[0])
    n_train = min(10_000, y.shape[0] // 4)
    train, pool = order[:n_train], order[n_train:]
    if quick:
        pool = pool[:12_000]
    model = make_pipeline(
        StandardScaler(),
        PCA(min(50, X.shape[1]), random_state=0),
        LogisticRegression(max_iter=1000),
    )
    with warnings.catch_warnings():  # a fixed, good-enough model
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X[train] / 255.0, y[train])
    proba = model.predict_proba(X[pool] / 255.0)
    clients = datasets.partition_dirichlet(
        y[pool], m, concentration=0.5, min_size=20, random_state=0
    )
    # Each client is its class mix (counts per class), fixed; which rows of
    # each class it holds is redrawn per split (see redraw_clients).
    counts = pd.crosstab(clients, y[pool]).to_numpy()
    return 1.0 - proba, y[pool], counts, source


def redraw_clients(y, counts, rng):
    """Rows of each class handed to the clients in their fixed counts."""
    ids = np.empty(y.shape[0], dtype=np.intp)
    for c in range(counts.shape[1]):
        rows = rng.permutation(np.flatnonzero(y == c))
        ids[rows] = np.repeat(np.arange(counts.shape[0]), counts[:, c])
    return ids


def run_classification(n_splits, quick):
    label_scores, y, counts, source = _federation(quick)
    labels, client_labels = np.unique(y), np.arange(counts.shape[0])
    rows = np.arange(y.shape[0])
    true_scores = label_scores[rows, y]
    records = []
    for split in range(n_splits):
        rng = np.random.default_rng(split)
        ids = redraw_clients(y, counts, rng)
        cal, test = split_within_clients(ids, rng, (0.5, 0.5))
        n_cal = np.array([(y[cal] == g).sum() for g in labels])
        for cname, thr in contenders(
            true_scores[cal], ids[cal], y[cal], labels
        ).items():
            sets = label_scores[test] <= thr[np.newaxis, :]
            hit = sets[np.arange(test.sum()), y[test]]
            records.append(
                (
                    cname,
                    *measure(
                        hit, sets.sum(1), y[test], ids[test], labels, client_labels
                    ),
                    n_cal,
                )
            )
    n_test = counts.sum(1) / 2
    return summarize(
        records,
        labels,
        client_labels,
        "class",
        n_splits,
        client_mask=n_test >= 50,
        source=source,
    )


def summarize(
    records,
    labels,
    client_labels,
    group_desc,
    n_splits,
    *,
    client_mask=None,
    source=None,
):
    out = []
    names = list(dict.fromkeys(r[0] for r in records))
    per = {n: [r for r in records if r[0] == n] for n in names}
    anchor_size = np.mean([r[3] for r in per["mondrian"]])
    for name in names:
        cov_g = np.array([r[1] for r in per[name]])
        cov_c = np.array([r[2] for r in per[name]])
        if client_mask is not None:
            cov_c = cov_c[:, client_mask]
        n_cal = np.mean([r[5] for r in per[name]], axis=0)
        mg, sg = np.nanmean(cov_g, 0), np.nanstd(cov_g, 0, ddof=1) / np.sqrt(n_splits)
        counts = np.sum(~np.isnan(cov_c), 0)
        mc = np.nanmean(cov_c, 0)
        sc = np.nanstd(cov_c, 0, ddof=1) / np.sqrt(np.maximum(counts, 1))
        wg, wc = int(np.nanargmin(mg)), int(np.nanargmin(mc))
        eligible = n_cal >= 1 / ALPHA - 1
        ok = np.all(mg[eligible] >= 1 - ALPHA - 3 * sg[eligible])
        out.append(
            {
                "contender": name,
                "worst_group": f"{labels[wg]}",
                "group_cov": mg[wg],
                "group_se": sg[wg],
                "worst_client_cov": mc[wc],
                "client_se": sc[wc],
                "clients_below_0.85": int(np.sum(mc < 0.85)),
                "n_clients": int(mc.size),
                "size_vs_mondrian": np.mean([r[3] for r in per[name]]) / anchor_size,
                "inf_share": np.mean([r[4] for r in per[name]]),
                "groups_ok_3se": bool(ok),
                "min_class_or_client": min(mg.min(), mc.min()),
            }
        )
    table = pd.DataFrame(out)
    table.attrs.update(groups=group_desc, source=source)
    return table


def _worst(row):
    """The worst group's mean coverage and its standard error."""
    cov, se = row["group_cov"], row["group_se"]
    return f"worst group {row['worst_group']} {cov:.3f} +- {se:.3f}"


def findings(results):
    """Lines comparing each table with its ``-shuffled`` twin; client groups.

    A contender covers a table when every group with at least
    ``1/alpha - 1`` calibration rows has mean coverage at least
    ``1 - alpha - 3 SE`` (``groups_ok_3se``). Where it misses a table but
    covers its ``-shuffled`` twin (the rows of each group handed to the
    clients at random), the shortfall went with the clients' heterogeneity
    within a group; where it misses both, it did not.
    """
    lines = []
    for name, table in results.items():
        twin = results.get(f"{name}-shuffled")
        if twin is None:
            continue
        t, u = table.set_index("contender"), twin.set_index("contender")
        for c in ("group-central", "group-qq", "group-avg"):
            ok, ok_shuffled = (
                bool(t.loc[c, "groups_ok_3se"]),
                bool(u.loc[c, "groups_ok_3se"]),
            )
            if ok and ok_shuffled:
                verdict = "covers every eligible group on both"
            elif not ok and ok_shuffled:
                verdict = (
                    "misses an eligible group, but not once the rows are handed out at "
                    "random: the shortfall goes with the clients' heterogeneity "
                    "within a group"
                )
            elif not ok:
                verdict = (
                    "misses an eligible group on both: the shortfall is not (only) the "
                    "clients' heterogeneity within a group"
                )
            else:
                verdict = "covers every eligible group, but misses one once shuffled"
            lines.append(
                f"{name} vs {name}-shuffled, {c}: {verdict} ({_worst(t.loc[c])}; "
                f"shuffled {_worst(u.loc[c])})"
            )
    for name, table in results.items():
        if name in TABULAR and TABULAR[name][1] is client_groups:
            row = table.set_index("contender").loc["group-qq"]
            verdict = (
                "covers every eligible client"
                if row["groups_ok_3se"]
                else "misses an eligible client"
            )
            lines.append(
                f"{name} (groups = the clients), group-qq (per-client split CP) "
                f"{verdict} ({_worst(row)})"
            )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-splits", type=int, default=200)
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=[*TABULAR, "label-skew"],
    )
    parser.add_argument("--quick", action="store_true", help="5 splits, smaller pool")
    args = parser.parse_args()
    n_splits = 5 if args.quick else args.n_splits
    print(f"alpha={ALPHA}, {n_splits} splits; Mondrian anchor: {MONDRIAN_SOURCE}")
    pd.set_option("display.width", 200)
    results = {}
    for name in args.datasets:
        if name == "label-skew":
            table = run_classification(n_splits, args.quick)
            title = f"{table.attrs['source']}, Dirichlet(0.5) label skew"
        else:
            table = run_tabular(name, n_splits)
            title = name
        print(f"\n== {title}; groups: {table.attrs['groups']} ==")
        cols = [c for c in table.columns if c != "min_class_or_client"]
        print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        results[name] = table
    print("\nAcceptance (issue 23):")
    for name, table in results.items():
        t = table.set_index("contender")
        if name != "label-skew":
            meet = [c for c in t.index if t.loc[c, "groups_ok_3se"]]
            print(
                f"  {name}: every group with >= 1/alpha - 1 calibration rows "
                f"covers >= 1 - alpha - 3 SE for: {', '.join(meet) or 'none'}"
            )
        for c in ("group-central", "group-qq"):
            if name == "label-skew":
                v = t.loc[c, "min_class_or_client"]
                print(
                    f"  {name} {c}: worst class / client (>=50 test rows) mean "
                    f"coverage {v:.3f} {'>=' if v >= 0.88 else '<'} 0.88"
                )
            r = t.loc[c, "size_vs_mondrian"]
            print(
                f"  {name} {c}: width / set size vs Mondrian {r:.4f} "
                f"({'within' if r <= 1.03 else 'beyond'} 1.03)"
            )
    print("\nWhat the tables show (per contender, from the numbers above):")
    for line in findings(results):
        print(f"  {line}")
    _common.RESULTS.mkdir(exist_ok=True)
    pd.concat(results, names=["dataset"]).to_csv(
        _common.RESULTS / "bench_heterogeneous.csv"
    )


if __name__ == "__main__":
    main()
