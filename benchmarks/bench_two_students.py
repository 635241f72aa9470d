"""Two Students on the paper's cos(x) experiment: filter, coverage, rounds.

The task of Iglesias Jr et al. (2024): ``y = cos(x) + N(0, 0.1)`` on [-5, 9],
135 clients of 50 rows: 100 i.i.d., 5 "range" (x in [-5, 2]), 5 "noise"
(extra 0.5 N(0, 1)) and 25 "mixed" (x in [-5, 2], extra 0.1 N(0, 1), +0.15).
Four studies, side by side in one run:

1. One-shot truncation filter (GBR teachers, kNN students) with the MAD band
   (skfedcp), the paper's percentile band and no filter: acceptance per
   client kind, the ensemble's 95 % band width on the 701 unlabelled inputs
   and the teacher mean's RMSE against cos(x).
2. Distillation: the mean student's RMSE against the ensemble mean on 3000
   held-out inputs (and relative to the teachers' mean standard deviation).
3. Monte Carlo coverage at alpha = 0.1 with m = 20 i.i.d. calibration clients
   of n = 30: raw 2S intervals beside conformalized ones (normalized, offset
   and absolute scores; QQ and central). Coverage is Rao-Blackwellised (exact
   over the test label, averaged over 200 test inputs per repetition). 3b:
   the raw interval's coverage as the clients' training sets grow.
4. The paper's multi-round protocol: 20 initial MLP(20, 20) members trained
   on the paper's 237-point server set, clients warm-started from the mean
   student, filter from round 2 against the previous uncertainty student:
   RMSPE (shifted by +5 as in the authors' code) and AIWA (mean width of the
   95 % interval) per round, with and without the filter. sklearn's L-BFGS
   replaces the paper's Adam schedule (orders of magnitude faster here):
   students train to convergence, clients fine-tune for 15 iterations from
   the mean student's weights. Clients reuse their rows every round (the
   paper's code redraws them).

Run: ``python benchmarks/bench_two_students.py`` (``--quick`` for ``make bench``).
"""

import argparse
import time
import warnings

import _common  # noqa: F401
import numpy as np
from scipy.stats import norm
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPRegressor

from skfedcp.calibrators import get_calibrator
from skfedcp.two_students import TwoStudentsRegressor, ensemble_stats

NOISE = 0.1
KINDS = np.array(["iid"] * 100 + ["range"] * 5 + ["noise"] * 5 + ["mixed"] * 25)
KIND_NAMES = ["iid", "range", "noise", "mixed"]
U_GRID = np.arange(-5, 9.0001, 0.02).reshape(-1, 1)


def cosine_clients(rng, kinds, n=50):
    X, y, ids = [], [], []
    for c, kind in enumerate(kinds):
        hi = 2.0 if kind in ("range", "mixed") else 9.0
        x = rng.uniform(-5, hi, n)
        yc = np.cos(x) + NOISE * rng.normal(size=n)
        if kind == "noise":
            yc += 0.5 * rng.normal(size=n)
        if kind == "mixed":
            yc += 0.1 * rng.normal(size=n) + 0.15
        X.append(x)
        y.append(yc)
        ids.append(np.full(n, c))
    return np.concatenate(X)[:, None], np.concatenate(y), np.concatenate(ids)


def d_init(rng):
    grid = np.round(np.arange(-4, 7.98 + 1e-9, 0.02), 2)
    windows = [(-4, -3.02), (-1.62, -0.42), (1.58, 2.44), (3.98, 4.98), (6.78, 7.38)]
    keep = np.zeros(grid.shape, bool)
    for lo, hi in windows:
        keep |= (grid >= lo - 1e-9) & (grid <= hi + 1e-9)
    x = grid[keep]
    return x[:, None], np.cos(x) + NOISE * rng.normal(size=x.size)


def rmspe(pred, x):
    f = np.cos(x)
    return 100 * np.sqrt(np.mean(((f + 5) - (pred + 5)) ** 2 / (f + 5) ** 2))


def acceptance(accepted):
    return {k: float(accepted[KINDS == k].mean()) for k in KIND_NAMES}


def study_filter(seeds):
    print("\n1-2. One-shot filter and distillation (GBR teachers, kNN students)")
    print(
        f"{'filter':>10s} {'iid':>5s} {'range':>5s} {'noise':>5s} {'mixed':>5s} "
        f"{'band':>6s} {'band/mad':>8s} {'mean-vs-cos':>11s} {'student':>8s} "
        f"{'stud/std':>8s}"
    )
    rows = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X, y, ids = cosine_clients(rng, KINDS)
        X_test = rng.uniform(-5, 9, size=(3000, 1))
        widths = {}
        for filt in ["mad", "percentile", "none"]:
            model = TwoStudentsRegressor(
                GradientBoostingRegressor(max_depth=2),
                mean_student=KNeighborsRegressor(5),
                filter=filt,
                random_state=seed,
            ).fit(X, y, ids, X_unlabeled=U_GRID)
            stats = ensemble_stats(model.predict_teachers(X_test))
            student = np.sqrt(np.mean((model.predict(X_test) - stats.mean) ** 2))
            truth = np.sqrt(np.mean((stats.mean - np.cos(X_test[:, 0])) ** 2))
            widths[filt] = model.ensemble_band_width_
            row = {
                "seed": seed,
                "filter": filt,
                **acceptance(model.accepted_),
                "band_width": widths[filt],
                "band_ratio_to_mad": widths[filt] / widths["mad"],
                "teacher_mean_rmse_vs_truth": truth,
                "student_rmse": student,
                "student_rmse_over_std": student / stats.std.mean(),
            }
            rows.append(row)
            print(
                f"{filt:>10s} {row['iid']:5.2f} {row['range']:5.2f} "
                f"{row['noise']:5.2f} {row['mixed']:5.2f} {row['band_width']:6.3f} "
                f"{row['band_ratio_to_mad']:8.2f} {truth:11.3f} {student:8.4f} "
                f"{row['student_rmse_over_std']:8.3f}"
            )
    return rows


def _covered(mu, half, x):
    f = np.cos(x)
    return norm.cdf((mu + half - f) / NOISE) - norm.cdf((mu - half - f) / NOISE)


def study_coverage(reps, seed, m=20, n=30, alpha=0.1, client_rows=50, quiet=False):
    if not quiet:
        print(
            f"\n3. Monte Carlo coverage, m={m} clients of n={n}, alpha={alpha}, "
            f"{reps} repetitions (mean ± 1 SE; width relative to the absolute score)"
        )
    rng = np.random.default_rng(seed)
    X, y, ids = cosine_clients(rng, KINDS, n=client_rows)
    model = TwoStudentsRegressor(
        GradientBoostingRegressor(max_depth=2), random_state=seed
    ).fit(X, y, ids, X_unlabeled=U_GRID)
    beta = model.sigma_offset_
    cal_ids = np.repeat(np.arange(m), n)
    cals = {name: get_calibrator(name) for name in ["qq", "central"]}
    out = {}
    for _ in range(reps):
        x_cal = rng.uniform(-5, 9, size=m * n)
        y_cal = np.cos(x_cal) + NOISE * rng.normal(size=m * n)
        x_test = rng.uniform(-5, 9, size=200)
        mu_c, s_c = model.predict(x_cal[:, None]), model.predict_std(x_cal[:, None])
        mu_t, s_t = model.predict(x_test[:, None]), model.predict_std(x_test[:, None])
        res = np.abs(y_cal - mu_c)
        for score, (w_c, w_t) in {
            "two_students": (s_c, s_t),
            "two_students_offset": (s_c + beta, s_t + beta),
            "absolute": (1.0, np.ones_like(s_t)),
        }.items():
            for name, cal in cals.items():
                q = cal.fit(res / w_c, cal_ids, alpha=alpha).threshold_
                out.setdefault((score, name), []).append(
                    (_covered(mu_t, q * w_t, x_test).mean(), 2 * q * w_t.mean())
                )
        half = norm.ppf(1 - alpha / 2) * s_t
        out.setdefault(("raw (no guarantee)", "-"), []).append(
            (_covered(mu_t, half, x_test).mean(), 2 * half.mean())
        )
    exact = {
        "qq": cals["qq"].calibration_info_["coverage"],
        "central": cals["central"].coverage_bounds([n] * m, alpha).upper,
        "-": float("nan"),
    }
    ref = np.mean([w for _, w in out[("absolute", "qq")]])
    if not quiet:
        print(
            f"{'interval':>20s} {'calib.':>8s} {'coverage':>17s} {'exact':>7s} "
            f"{'width':>6s} {'ratio':>6s}"
        )
    rows = []
    for (score, name), values in out.items():
        values = np.asarray(values)
        cov, width = values.mean(axis=0)
        se = values[:, 0].std(ddof=1) / np.sqrt(reps)
        if not quiet:
            print(
                f"{score:>20s} {name:>8s} {cov:8.4f} ± {se:.4f} "
                f"{exact[name]:7.4f} {width:6.3f} {width / ref:6.2f}"
            )
        rows.append(
            {
                "interval": score,
                "calibrator": name,
                "coverage": cov,
                "se": se,
                "exact": exact[name],
                "width": width,
                "width_ratio_to_absolute": width / ref,
            }
        )
    return rows


def study_client_size(reps, seed, sizes):
    print(
        "\n3b. Raw 90 % intervals against conformalized ones (QQ, normalized "
        f"score) as the clients' training rows grow, {reps} repetitions"
    )
    print(
        f"{'rows/client':>11s} {'raw cov.':>8s} {'raw width':>9s} {'conf. cov.':>10s} "
        f"{'conf. width':>11s} {'width ratio':>11s}"
    )
    rows = []
    for size in sizes:
        res = study_coverage(reps, seed, client_rows=size, quiet=True)
        raw = next(r for r in res if r["calibrator"] == "-")
        conf = next(
            r for r in res if (r["interval"], r["calibrator"]) == ("two_students", "qq")
        )
        print(
            f"{size:11d} {raw['coverage']:8.3f} {raw['width']:9.3f} "
            f"{conf['coverage']:10.3f} {conf['width']:11.3f} "
            f"{conf['width'] / raw['width']:11.2f}"
        )
        rows.append({"client_rows": size, "raw": raw, "conformal": conf})
    return rows


def study_rounds(n_rounds, seeds, n_initial=20):
    print(
        f"\n4. Multi-round protocol, {n_rounds} rounds, {n_initial} initial members, "
        f"{len(KINDS)} clients, runs {list(seeds)} (mean over runs)"
    )
    mlp = {"hidden_layer_sizes": (20, 20), "solver": "lbfgs"}
    table = {}
    accept = {}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X_init, y_init = d_init(rng)
        X, y, ids = cosine_clients(rng, KINDS)
        X_test = rng.uniform(-5, 9, size=(1000, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            trusted, s = [], 1000 * seed
            while len(trusted) < n_initial:  # the paper's acceptance rule
                net = MLPRegressor(**mlp, max_iter=1000, random_state=s)
                net.fit(X_init, y_init)
                s += 1
                if np.mean((net.predict(X_init) - y_init) ** 2) < 0.015:
                    trusted.append(net)
            for filt in ["percentile", "none"]:
                model = TwoStudentsRegressor(
                    MLPRegressor(**mlp, max_iter=15),  # the clients' recipe
                    mean_student=MLPRegressor(**mlp, max_iter=1000),
                    uq_target="quantiles",
                    filter=filt,
                    filter_reference="previous",
                    n_rounds=n_rounds,
                    random_state=seed,
                )
                model.fit(
                    X, y, ids, X_unlabeled=U_GRID, X_ref=X_init, trusted_models=trusted
                )
                staged = zip(
                    model.history_,
                    model.staged_predict(X_test),
                    model.staged_predict_raw_interval(X_test, alpha=0.05),
                    strict=True,
                )
                for entry, pred, iv in staged:
                    key = (filt, entry["round"])
                    table.setdefault(key, []).append(
                        (
                            rmspe(pred, X_test[:, 0]),
                            float(np.mean(iv[:, 1] - iv[:, 0])),
                            entry["n_teachers"],
                        )
                    )
                    if entry["filtered"]:
                        accept.setdefault(key, []).append(acceptance(entry["accepted"]))
    print(
        f"{'round':>5s} {'RMSPE filter':>12s} {'RMSPE none':>10s} {'AIWA filter':>11s} "
        f"{'AIWA none':>9s} {'ratio':>6s} {'|E| filter':>10s} {'|E| none':>8s} "
        f"{'kept iid/range/noise/mixed (filter)':>36s}"
    )
    rows = []
    for r in range(n_rounds + 1):
        f = np.mean(table[("percentile", r)], axis=0)
        nf = np.mean(table[("none", r)], axis=0)
        acc = accept.get(("percentile", r))
        if acc:
            acc = {k: float(np.mean([a[k] for a in acc])) for k in KIND_NAMES}
        acc_txt = "/".join(f"{acc[k]:.2f}" for k in KIND_NAMES) if acc else "all"
        print(
            f"{r:5d} {f[0]:12.3f} {nf[0]:10.3f} {f[1]:11.3f} {nf[1]:9.3f} "
            f"{f[1] / nf[1]:6.2f} {f[2]:10.0f} {nf[2]:8.0f} {acc_txt:>36s}"
        )
        rows.append(
            {
                "round": r,
                "rmspe_filter": f[0],
                "rmspe_none": nf[0],
                "aiwa_filter": f[1],
                "aiwa_none": nf[1],
                "ensemble_size_filter": f[2],
                "ensemble_size_none": nf[2],
                "acceptance_filter": acc,
            }
        )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small version")
    args = parser.parse_args(argv)
    if args.quick:
        seeds, reps, n_rounds, round_seeds = [0], 100, 2, [0]
        sizes = [25, 200]
    else:
        seeds, reps, n_rounds, round_seeds = [0, 1, 2], 500, 6, [0, 1, 2]
        sizes = [25, 50, 100, 200, 400]
    start = time.perf_counter()
    record = {
        "quick": args.quick,
        "filter": study_filter(seeds),
        "coverage": study_coverage(reps, seed=0),
        "client_size": study_client_size(reps // 2, 0, sizes),
        "rounds": study_rounds(n_rounds, round_seeds),
    }
    record["wall_time_s"] = time.perf_counter() - start
    path = _common.save_record("two_students", record)
    print(f"\nrecord: {path}")


if __name__ == "__main__":
    main()
