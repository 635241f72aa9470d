"""Cold cost of every public plan, and of a grid search that pays the plan per fold.

A plan is the public, data-free choice of ranks, levels, bins and gamma that a
fit computes from the client sizes before any score is read. It is cached per
(sizes, alpha) inside a process, so a user meets it cold on every new
federation, fold or group. Each cell here runs in a fresh Python process
(imports done before the clock starts, no cache warm) and times one call of
the calibrator's ``plan(sizes, alpha)``; a cell still running after
``--budget`` seconds is stopped and reported as ``> budget``. The wall time
and the plan's CPU time are both shown (on a shared machine the CPU time is
the steadier of the two).

Sizes are drawn uniformly from the stated range with a fixed seed per cell.
A grouped cell times one plan per group, each group's cell sizes drawn
anew (what ``GroupedCalibrator`` and ``group_by`` pay per fit).
A cell marked (*) raises the plan policy's ``max_client_size`` (default
10^9) and ``max_total_size`` (default 10^8 rows in all) so that the plan is
computed: the defaults refuse such a client before any work.

The grid-search line: ``GridSearchCV`` over 3 values of ``alpha`` x 5 folds
(``GroupKFold`` on the clients) of ``FedConformalRegressor`` around a frozen
ridge model, 100 clients of 10-1,000 rows, ``qq`` (the default rule,
``local_rank="auto"`` and ``"fixed"``) beside ``central`` in the same run
(best of ``--repeat`` runs each, every run in a fresh process, the runs
interleaved; wall and CPU time, the CPU time being the steadier on a shared
machine).

Run: ``python benchmarks/bench_plans.py [--quick | --dp | --grid-only]
[--budget SECONDS] [--repeat RUNS]`` (``--dp``: the dp-qq and dp-central cells
only, no grid search; ``--grid-only``: the grid-search line only).
"""

import argparse
import json

import _common

ALPHA = 0.1
#: A cell's parameters may carry plan limits (``skfedcp.config_context``).
LIMITS = "_limits"
#: A cell's parameters may ask for one plan per group, this many groups.
GROUPS = "_groups"

#: (label, calibrator alias, parameters, clients, size range, extra sizes)
CELLS = [
    ("QQ A.1 (fixed)", "qq", {"local_rank": "fixed"}, 10, (10, 1000), ()),
    ("QQ A.1 (fixed)", "qq", {"local_rank": "fixed"}, 100, (10, 1000), ()),
    ("QQ A.1 (fixed)", "qq", {"local_rank": "fixed"}, 1000, (10, 1000), ()),
    ("QQ auto", "qq", {"local_rank": "auto"}, 10, (10, 1000), ()),
    ("QQ auto", "qq", {"local_rank": "auto"}, 100, (10, 1000), ()),
    ("QQ auto", "qq", {"local_rank": "auto"}, 1000, (10, 1000), ()),
    (
        "QQ A.1, 7 x 10^3 + one 10^12 (*)",
        "qq",
        {
            "local_rank": "fixed",
            LIMITS: {"max_client_size": 10**12, "max_total_size": 2 * 10**12},
        },
        7,
        (1000, 1000),
        (10**12,),
    ),
    (
        "QQ A.1, 7 x 10^3 + one 10^3",
        "qq",
        {"local_rank": "fixed"},
        7,
        (1000, 1000),
        (10**3,),
    ),
    ("dp-qq paper", "dp-qq", {"epsilon": 1.0}, 8, (20, 400), ()),
    ("dp-qq paper", "dp-qq", {"epsilon": 1.0}, 40, (20, 400), ()),
    ("dp-qq paper", "dp-qq", {"epsilon": 1.0}, 100, (10, 1000), ()),
    ("dp-qq paper", "dp-qq", {"epsilon": 1.0}, 1000, (10, 1000), ()),
    (
        "dp-qq tight, quantile",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight"},
        8,
        (20, 400),
        (),
    ),
    (
        "dp-qq tight, quantile",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight"},
        40,
        (20, 400),
        (),
    ),
    (
        "dp-qq tight, rank",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight", "utility": "rank"},
        8,
        (20, 400),
        (),
    ),
    (
        "dp-qq tight, rank",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight", "utility": "rank"},
        40,
        (20, 400),
        (),
    ),
    (
        "dp-qq tight, rank, eps=5",
        "dp-qq",
        {"epsilon": 5.0, "rule": "tight", "utility": "rank"},
        10,
        (132, 345),
        (),
    ),
    (
        "dp-central paper",
        "dp-central",
        {"epsilon": 1.0, "rule": "paper"},
        100,
        (10, 1000),
        (),
    ),
    (
        "dp-central tight",
        "dp-central",
        {"epsilon": 1.0, "rule": "tight"},
        100,
        (10, 1000),
        (),
    ),
    (
        "QQ A.1, 7 x 10^3 + one 10^9 (*)",
        "qq",
        {"local_rank": "fixed", LIMITS: {"max_total_size": 2 * 10**9}},
        7,
        (1000, 1000),
        (10**9,),
    ),
    (
        "dp-qq tight, quantile",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight"},
        100,
        (10, 1000),
        (),
    ),
    (
        "dp-qq tight, quantile",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight"},
        1000,
        (10, 1000),
        (),
    ),
    (
        "dp-qq tight, rank",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight", "utility": "rank"},
        100,
        (10, 1000),
        (),
    ),
    (
        "dp-qq tight, rank",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight", "utility": "rank"},
        1000,
        (10, 1000),
        (),
    ),
    (
        "dp-qq paper, 7 x 10^3 + one 10^3",
        "dp-qq",
        {"epsilon": 1.0},
        7,
        (1000, 1000),
        (10**3,),
    ),
    (
        "dp-qq paper, 7 x 10^3 + one 10^9 (*)",
        "dp-qq",
        {"epsilon": 1.0, LIMITS: {"max_total_size": 2 * 10**9}},
        7,
        (1000, 1000),
        (10**9,),
    ),
    (
        "dp-qq tight, 7 x 10^3 + one 10^3",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight"},
        7,
        (1000, 1000),
        (10**3,),
    ),
    (
        "dp-qq tight, 7 x 10^3 + one 10^9 (*)",
        "dp-qq",
        {"epsilon": 1.0, "rule": "tight", LIMITS: {"max_total_size": 2 * 10**9}},
        7,
        (1000, 1000),
        (10**9,),
    ),
    (
        "dp-central paper",
        "dp-central",
        {"epsilon": 1.0, "rule": "paper"},
        1000,
        (10, 1000),
        (),
    ),
    (
        "dp-central tight",
        "dp-central",
        {"epsilon": 1.0, "rule": "tight"},
        1000,
        (10, 1000),
        (),
    ),
    (
        "dp-central tight, 7 x 10^3 + one 10^9 (*)",
        "dp-central",
        {"epsilon": 1.0, "rule": "tight", LIMITS: {"max_total_size": 2 * 10**9}},
        7,
        (1000, 1000),
        (10**9,),
    ),
    # The default rule (eq. 6 with equal sizes, A.1 with unequal ones).
    ("QQ paper (default)", "qq", {}, 100, (10, 1000), ()),
    ("QQ paper (default)", "qq", {}, 1000, (10, 1000), ()),
    # Group-conditional: one plan per group, each group's cell sizes drawn
    # anew (GroupedCalibrator runs the strategy once per group).
    ("QQ grouped, 10 groups (paper)", "qq", {GROUPS: 10}, 100, (10, 1000), ()),
    (
        "QQ grouped, 10 groups (auto)",
        "qq",
        {GROUPS: 10, "local_rank": "auto"},
        100,
        (10, 1000),
        (),
    ),
    # Inside the default plan policy (10^8 rows in all): many clients.
    ("QQ paper, many clients", "qq", {}, 10**4, (10, 1000), ()),
    ("QQ paper, many clients", "qq", {}, 10**5, (10, 1000), ()),
]
#: ``--quick``: these (label, clients) cells, and every cell of QUICK_LABELS
#: (by name, so that inserting a cell never changes what the quick run times).
QUICK = {
    ("QQ A.1 (fixed)", 10),
    ("QQ A.1 (fixed)", 100),
    ("QQ auto", 10),
    ("QQ A.1, 7 x 10^3 + one 10^12 (*)", 7),
    ("QQ A.1, 7 x 10^3 + one 10^3", 7),
    ("dp-qq paper", 8),
    ("dp-qq tight, quantile", 8),
    ("dp-qq tight, rank", 8),
    ("dp-central paper", 100),
    ("dp-central tight", 100),
    ("QQ A.1, 7 x 10^3 + one 10^9 (*)", 7),
}
QUICK_LABELS = {"QQ paper (default)", "QQ grouped, 10 groups (paper)"}
#: ``--dp``: every private (dp-qq, dp-central) cell.
DP = {i for i, cell in enumerate(CELLS) if cell[1].startswith("dp-")}


def _sizes(n_clients, size_range, extra, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    low, high = size_range
    sizes = rng.integers(low, high + 1, size=n_clients).tolist()
    return np.asarray(sizes + list(extra), dtype=np.int64)


def run_cell(spec):
    """In the child: build the calibrator, time one cold ``plan`` call."""
    import time
    import warnings

    from skfedcp import config_context
    from skfedcp.calibrators import get_calibrator

    params = dict(spec["params"])
    limits = params.pop(LIMITS, {})
    n_groups = params.pop(GROUPS, None)
    seeds = (
        [spec["seed"]]
        if n_groups is None
        else [1000 * spec["seed"] + g for g in range(n_groups)]
    )
    plans = [_sizes(spec["clients"], spec["range"], spec["extra"], s) for s in seeds]
    calibrator = get_calibrator(spec["alias"]).set_params(**params)
    if spec["alias"].startswith("dp-"):
        calibrator.set_params(score_bounds=(0.0, 1.0))
    with warnings.catch_warnings(), config_context(**limits):
        warnings.simplefilter("ignore")
        start, cpu = time.perf_counter(), time.process_time()
        try:
            for sizes in plans:
                calibrator.plan(sizes, ALPHA)
            outcome = "planned"
        except Exception as exc:  # a refusal is a result here
            outcome = f"refused: {type(exc).__name__}"
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": took, "cpu_seconds": cpu, "outcome": outcome}


def run_grid(spec):
    """In the child: one GridSearchCV over alpha, 5 client folds."""
    import time
    import warnings

    import numpy as np
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV, GroupKFold

    from skfedcp import FedConformalRegressor
    from skfedcp.calibrators import get_calibrator

    sizes = _sizes(100, (10, 1000), (), 0)
    rng = np.random.default_rng(1)
    n = int(sizes.sum())
    X = rng.normal(size=(n, 5))
    y = X @ rng.normal(size=5) + rng.normal(size=n)
    ids = np.repeat(np.arange(sizes.size), sizes)
    model = FrozenEstimator(Ridge().fit(X, y))
    calibrator = get_calibrator(spec["calibrator"]).set_params(**spec["params"])
    grid = GridSearchCV(
        FedConformalRegressor(model, calibrator=calibrator),
        {"alpha": [0.05, 0.1, 0.2]},
        cv=GroupKFold(n_splits=5),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start, cpu = time.perf_counter(), time.process_time()
        grid.fit(X, y, client_ids=ids, groups=ids)
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": took, "cpu_seconds": cpu, "outcome": "fitted"}


def _child(kind, spec, budget):
    """Run one measurement in a fresh interpreter; None if over budget."""
    return _common.run_fresh(__file__, kind, spec, budget)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cells only")
    parser.add_argument("--dp", action="store_true", help="the private cells only")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--repeat", type=int, default=3, help="grid-search runs each")
    parser.add_argument(
        "--grid-only", action="store_true", help="the grid-search line only"
    )
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    parser.add_argument("--grid", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        print(json.dumps(run_cell(json.loads(args.cell))))
        return
    if args.grid:
        print(json.dumps(run_grid(json.loads(args.grid))))
        return

    rows = []
    head = f"{'plan':42s} {'clients':>8s} {'sizes':>12s} {'time':>10s}"
    if not args.grid_only:
        print(f"{head} {'cpu':>10s}  outcome")
    for index, (label, alias, params, clients, size_range, extra) in enumerate(CELLS):
        if (
            (args.quick and (label, clients) not in QUICK and label not in QUICK_LABELS)
            or (args.dp and index not in DP)
            or args.grid_only
        ):
            continue
        spec = {
            "alias": alias,
            "params": params,
            "clients": clients,
            "range": size_range,
            "extra": list(extra),
            "seed": index,
        }
        result = _child("cell", spec, args.budget)
        shown = (
            f"> {args.budget:.0f} s" if result is None else f"{result['seconds']:.3f} s"
        )
        # CPU time of the plan: the wall time on a loaded machine overstates it.
        cpu = "" if result is None else f"{result['cpu_seconds']:.3f} s"
        outcome = "over budget" if result is None else result["outcome"]
        m = clients + len(extra)
        span = f"{size_range[0]}-{size_range[1]}"
        print(f"{label:42s} {m:8d} {span:>12s} {shown:>10s} {cpu:>10s}  {outcome}")
        rows.append({**spec, "label": label, "result": result})

    grid, grid_cpu = {}, {}
    if not (args.quick or args.dp):
        searches = {
            "central": ("central", {}),
            "qq (default)": ("qq", {}),
            "qq (auto)": ("qq", {"local_rank": "auto"}),
            "qq (fixed)": ("qq", {"local_rank": "fixed"}),
        }
        # Interleaved (central, qq, ..., central, qq, ...): every search
        # meets the same background load on a shared machine.
        # The wall time and the CPU time of the search (on a loaded machine
        # the CPU time is the steadier).
        times = {name: ([], []) for name in searches}
        for _ in range(args.repeat):
            for name, (alias, params) in searches.items():
                spec = {"calibrator": alias, "params": params}
                result = _child("grid", spec, 20 * args.budget)
                if result is not None:
                    times[name][0].append(result["seconds"])
                    times[name][1].append(result["cpu_seconds"])
        best = {
            name: tuple(min(t) if t else float("inf") for t in pair)
            for name, pair in times.items()
        }
        grid = {name: wall for name, (wall, _) in best.items()}
        grid_cpu = {name: cpu for name, (_, cpu) in best.items()}
        wall, cpu = best["central"]
        print(
            f"\nGridSearchCV, 3 alphas x 5 folds, 100 clients of 10-1,000 rows "
            f"(best of {args.repeat}): central {wall:.3f} s (cpu {cpu:.3f} s)"
        )
        for name in ("qq (default)", "qq (auto)", "qq (fixed)"):
            ratios = [best[name][i] / best["central"][i] for i in (0, 1)]
            print(
                f"  {name}: {best[name][0]:.3f} s (cpu {best[name][1]:.3f} s), "
                f"ratio {ratios[0]:.2f}x (cpu {ratios[1]:.2f}x; target <= 1.5x)"
            )
    path = _common.save_record(
        "bench_plans",
        {"cells": rows, "grid_search": grid, "grid_search_cpu": grid_cpu},
    )
    print(f"record: {path}")


if __name__ == "__main__":
    main()
