"""Time the FedCP-QQ rank selection ``select_qq_ranks`` against plain evaluation.

For m = n in {10, 100, 1000} (``--quick``: {10, 20, 100}) and alpha = 0.1, times
``select_qq_ranks([n] * m, alpha)`` with a cold cache (best of several runs)
against two straightforward selections, each run in a child process with a
time budget (default 60 s):

* "exact grid": the paper's combinatorial formula (Theorem 3.2) evaluated with
  Python ints and Fractions, grouped by the sum of indices, for every (l, k)
  of the full grid, then the argmin of eq. (6);
* "staircase + quad": the O(n + m) staircase walk of the spec (section 2.4) with
  one scalar ``scipy.integrate.quad`` call per coverage.

A second table covers clients of unequal sizes (issue 14, item 1): for the
reference sizes [5, 10, 20, 40, 15, 8, 30, 12] and for m in {10, 50, 100,
1000} clients with sizes drawn uniformly from 10..1,000 (seed 0), the fixed
rule of Appendix A.1 (``local_rank="fixed"``), the default
``local_rank="auto"`` (its tier: "joint" = every level and k, "level" = every
level for the k near A.1's, "A.1" beyond; see ``_select_auto_unequal``) and
the full joint search (``local_rank="joint"``), each timed once from a cold
cache in a child process with the same budget, with the coverage M each
reaches and the excess M - (1 - alpha) that "auto" removes from A.1's.

Prints the tables (machines are noisy: compare ratios, not seconds) and
writes a JSON record to ``benchmarks/results/bench_qq_selection.json``. Run:
``python benchmarks/bench_qq_selection.py [--quick] [--budget SECONDS]``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402

import skfedcp  # noqa: E402
from skfedcp.calibrators._qq._coverage import (  # noqa: E402
    qq_coverage,
    qq_coverage_fraction,
)
from skfedcp.calibrators._qq._selection import select_qq_ranks  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TOL = 1e-10  # feasibility tolerance, as in select_qq_ranks


def exact_grid_selection(m, n, alpha):
    """argmin of eq. (6) over the full grid, every M as an exact Fraction."""
    target = 1 - alpha - TOL
    best = None
    for l in range(1, n + 1):
        for k in range(1, m + 1):
            value = qq_coverage_fraction(m, n, l, k)
            if value >= target and (best is None or value < best[0]):
                best = (value, l, k)
    return None if best is None else (best[1], best[2], float(best[0]))


def staircase_quad_selection(m, n, alpha):
    """Spec section 2.4: walk l = 1..n, k_min(l) non-increasing, scalar quad."""
    target = 1 - alpha - TOL
    best, k = None, m
    for l in range(1, n + 1):
        if qq_coverage(m, n, l, k) < target:
            continue  # no valid k for this l (k = m is the largest)
        while k > 1 and qq_coverage(m, n, l, k - 1) >= target:
            k -= 1
        value = qq_coverage(m, n, l, k)
        if best is None or value < best[0]:
            best = (value, l, k)
    return None if best is None else (best[1], best[2], best[0])


BASELINES = {
    "exact grid": exact_grid_selection,
    "staircase + quad": staircase_quad_selection,
}


def _unequal(rule, sizes, alpha):
    sel = select_qq_ranks(list(sizes), alpha, local_rank=rule)
    return (sel.k, sel.coverage) if sel.feasible else None


def _child(name, m, n, alpha, queue):
    start = time.perf_counter()
    if name in ("fixed", "auto", "joint"):  # m is the tuple of sizes here
        result = _unequal(name, m, alpha)
    else:
        result = BASELINES[name](m, n, alpha)
    queue.put((time.perf_counter() - start, result))


def run_with_budget(name, m, n, alpha, budget):
    """(seconds, result) or (None, None) if the budget ran out."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(name, m, n, alpha, queue), daemon=True)
    proc.start()
    try:
        return queue.get(timeout=budget)
    except Exception:  # queue.Empty: over budget
        return None, None
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()


def time_selection(m, n, alpha, repeat):
    times = []
    for _ in range(repeat):
        select_qq_ranks.cache_clear()
        start = time.perf_counter()
        sel = select_qq_ranks([n] * m, alpha)
        times.append(time.perf_counter() - start)
    return min(times), sel


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = n in {10, 20, 100}")
    parser.add_argument(
        "--budget", type=float, default=None, help="seconds per baseline"
    )
    parser.add_argument("--alpha", type=float, default=0.1)
    args = parser.parse_args(argv)
    sizes = [10, 20, 100] if args.quick else [10, 100, 1000]
    budget = args.budget if args.budget is not None else (10.0 if args.quick else 60.0)

    rows = []
    header = (
        f"{'m = n':>6} | {'(l*, k*)':>11} | {'select_qq_ranks':>15} | "
        f"{'exact grid':>12} {'ratio':>8} | {'staircase+quad':>14} {'ratio':>8}"
    )
    print(f"alpha = {args.alpha}, baseline budget {budget:g} s, single thread")
    print(header)
    print("-" * len(header))
    for size in sizes:
        fast, sel = time_selection(
            size, size, args.alpha, repeat=5 if size < 1000 else 3
        )
        row = {
            "m": size,
            "n": size,
            "alpha": args.alpha,
            "pair": [sel.local_ranks[0], sel.k] if sel.feasible else None,
            "coverage": sel.coverage,
            "select_qq_ranks_s": fast,
        }
        cells = []
        for name in BASELINES:
            seconds, result = run_with_budget(name, size, size, args.alpha, budget)
            key = name.replace(" + ", "_").replace(" ", "_")
            row[f"{key}_s"] = seconds
            if seconds is None:
                cells.append(f"{'> ' + format(budget, 'g') + ' s':>12} {'-':>8}")
                print(f"  [{name} did not finish in {budget:g}s at m = n = {size}]")
                continue
            agrees = result is not None and list(result[:2]) == row["pair"]
            row[f"{key}_agrees"] = bool(agrees)
            cells.append(f"{seconds:>10.3g} s {seconds / fast:>7.0f}x")
            if not agrees:
                print(f"  [{name} picked {result}, select_qq_ranks {row['pair']}]")
        print(
            f"{size:>6} | {str(tuple(row['pair'])):>11} | {fast:>13.3g} s | "
            f"{cells[0]} | {cells[1]}"
        )
        rows.append(row)

    unequal_rows = unequal_table(args.alpha, budget, args.quick)

    RESULTS.mkdir(exist_ok=True)
    record = {
        "benchmark": "bench_qq_selection",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "skfedcp": skfedcp.__version__,
            "machine": platform.machine(),
        },
        "quick": args.quick,
        "budget_s": budget,
        "sizes": sizes,
        "results": rows,
        "unequal": unequal_rows,
    }
    path = RESULTS / "bench_qq_selection.json"
    path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")


def auto_tier(sizes):
    """Which family local_rank="auto" searches for these sizes."""
    from skfedcp.calibrators._qq import _selection as qs

    work = len(sizes) * len(set(sizes))
    if work <= qs._JOINT_MAX_WORK:
        return "joint"
    return "level" if work <= qs._LEVEL_MAX_WORK else "A.1"


def unequal_table(alpha, budget, quick):
    """Fixed rule (A.1) vs "auto" vs the joint (c, k) search, unequal sizes."""
    rng = np.random.default_rng(0)
    cases = [("reference", (5, 10, 20, 40, 15, 8, 30, 12))]
    for m in [10, 20] if quick else [10, 50, 100, 1000]:
        cases.append((f"{m} x U(10..1000)", tuple(rng.integers(10, 1001, m).tolist())))
    rules = ("fixed", "auto", "joint")
    header = (
        f"{'clients':>18} | {'fixed (A.1)':>11} {'k':>4} {'M':>9} | "
        f"{'auto':>9} {'tier':>5} {'k':>4} {'M':>9} | "
        f"{'joint':>9} {'k':>4} {'M':>9} | {'excess removed':>14}"
    )
    print(f"\nunequal sizes, alpha = {alpha}, budget {budget:g} s per rule")
    print(header)
    print("-" * len(header))
    rows = []
    for label, sizes in cases:
        row = {"case": label, "sizes": list(sizes), "auto_tier": auto_tier(sizes)}
        cells = []
        for rule in rules:
            seconds, result = run_with_budget(rule, sizes, None, alpha, budget)
            row[f"{rule}_s"] = seconds
            row[f"{rule}_k"], row[f"{rule}_coverage"] = result or (None, None)
            tier = f" {row['auto_tier']:>5}" if rule == "auto" else ""
            width = 11 if rule == "fixed" else 9
            if seconds is None:
                over = "> " + format(budget, "g") + " s"
                cells.append(f"{over:>{width}}{tier} {'-':>4} {'-':>9}")
            elif result is None:
                cells.append(
                    f"{seconds:>{width - 2}.3g} s{tier} {'-':>4} {'infeas.':>9}"
                )
            else:
                k, cov = result
                cells.append(f"{seconds:>{width - 2}.3g} s{tier} {k:>4} {cov:>9.6f}")
        fixed_m, auto_m = row["fixed_coverage"], row["auto_coverage"]
        if fixed_m is not None and auto_m is not None and fixed_m > 1 - alpha:
            share = (fixed_m - auto_m) / (fixed_m - (1 - alpha))
            gain = f"{100 * share:>13.1f}%"
        else:
            gain = f"{'-':>14}"
        print(f"{label:>18} | {cells[0]} | {cells[1]} | {cells[2]} | {gain}")
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
