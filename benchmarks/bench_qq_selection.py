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

Prints a table (machines are noisy: compare ratios, not seconds) and writes a
JSON record to ``benchmarks/results/bench_qq_selection.json``. Run:
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
from skfedcp.calibrators._qq_coverage import (  # noqa: E402
    qq_coverage,
    qq_coverage_fraction,
)
from skfedcp.calibrators._qq_selection import select_qq_ranks  # noqa: E402

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


def _child(name, m, n, alpha, queue):
    start = time.perf_counter()
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
    }
    path = RESULTS / "bench_qq_selection.json"
    path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
