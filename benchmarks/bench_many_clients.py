"""Private calibrators with many small clients, side by side with QQ (issue 12.4).

Times ``fit`` of ``qq``, ``dp-central``, ``ldp-l`` and ``ldp-s`` on 10,000
clients of 5 rows each (uniform scores; LDP-L gets the 10-class score matrix
of the same rows), interleaved so that every strategy sees the same
background load, and prints each one's best time and its ratio to ``qq``
(goal: <= 10x). Then, in a fresh subprocess, LDP-L's peak memory on 2 clients
of 500,000 rows and 10 classes, as a ratio to its 80 MB score matrix
(goal: <= 3x): ``tracemalloc``'s peak of the allocations made during ``fit``
(NumPy reports its buffers to it) and the growth of the process's peak
resident set during ``fit``.

Run: ``python benchmarks/bench_many_clients.py [--quick]`` (from a git
worktree, ``PYTHONPATH=. python benchmarks/...`` so that the worktree's
``skfedcp`` is imported rather than the installed one).
"""

import argparse
import json
import subprocess
import sys
import time
import warnings

import _common  # noqa: F401  (single-threaded BLAS)
import numpy as np

from skfedcp.calibrators import (
    LDPLabelCalibrator,
    LDPScoreCalibrator,
    PrivateCentralCalibrator,
    QuantileOfQuantilesCalibrator,
)

N_CLIENTS, ROWS, N_CLASSES, ALPHA = 10_000, 5, 10, 0.1


def _data(n_clients, rows, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    n = n_clients * rows
    proba = rng.dirichlet(np.ones(n_classes), size=n)
    labels = rng.integers(n_classes, size=n)
    matrix = 1.0 - proba
    scores = matrix[np.arange(n), labels]
    client_ids = np.repeat(np.arange(n_clients), rows)
    return scores, matrix, labels, client_ids


def _fits(scores, matrix, labels, client_ids):
    qq = QuantileOfQuantilesCalibrator()
    dpc = PrivateCentralCalibrator(epsilon=1.0, score_bounds=(0, 1))
    ldpl = LDPLabelCalibrator(epsilon=1.0)
    ldps = LDPScoreCalibrator(epsilon=1.0, score_bounds=(0, 1))
    return {
        "qq": lambda: qq.fit(scores, client_ids, alpha=ALPHA),
        "dp-central": lambda: dpc.fit(scores, client_ids, alpha=ALPHA, random_state=0),
        "ldp-l": lambda: ldpl.fit(
            matrix, client_ids, labels=labels, alpha=ALPHA, random_state=0
        ),
        "ldp-s": lambda: ldps.fit(scores, client_ids, alpha=ALPHA, random_state=0),
    }


def time_fits(repeat, budget):
    """Best seconds per fit, interleaved; a strategy stops after ``budget`` s."""
    fits = _fits(*_data(N_CLIENTS, ROWS, N_CLASSES))
    best = dict.fromkeys(fits, np.inf)
    spent = dict.fromkeys(fits, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fit in fits.values():  # warm-up (imports, caches)
            fit()
        for _ in range(repeat):
            for name, fit in fits.items():
                if spent[name] > budget:
                    continue
                start = time.perf_counter()
                fit()
                took = time.perf_counter() - start
                best[name] = min(best[name], took)
                spent[name] += took
    return best


def _memory_child(n_per_client, n_clients):
    """Run in a subprocess: LDP-L's peak memory during fit, as JSON."""
    import resource
    import tracemalloc

    _, matrix, labels, client_ids = _data(n_clients, n_per_client, N_CLASSES)
    cal = LDPLabelCalibrator(epsilon=1.0)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(matrix, client_ids, labels=labels, alpha=ALPHA, random_state=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "matrix": matrix.nbytes,
                "tracemalloc_peak": peak,
                "rss_growth": rss_after - rss_before,
                "rss_peak": rss_after,
            }
        )
    )


def memory(n_per_client, n_clients):
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(n_per_client), str(n_clients)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--memory-child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(*args.memory_child)
        return
    repeat, budget = (3, 5.0) if args.quick else (7, 20.0)
    best = time_fits(repeat, budget)
    print(
        f"{N_CLIENTS:,} clients x {ROWS} rows (LDP-L: {N_CLASSES} classes), "
        f"alpha={ALPHA}, best of <= {repeat} interleaved runs"
    )
    print(f"{'strategy':<12}{'fit time':>12}{'ratio to qq':>14}{'goal':>8}")
    for name, seconds in best.items():
        goal = "" if name == "qq" else "<= 10"
        ratio = seconds / best["qq"]
        print(f"{name:<12}{seconds * 1e3:>9.1f} ms{ratio:>13.1f}x{goal:>8}")
    rows = 250_000 if args.quick else 500_000
    mem = memory(rows, 2)
    mb = mem["matrix"] / 2**20
    print(
        f"\nLDP-L peak memory, 2 clients x {rows:,} rows, {N_CLASSES} classes "
        f"(score matrix {mb:.0f} MB), goal <= 3x the matrix:"
    )
    print(
        f"  tracemalloc peak during fit: {mem['tracemalloc_peak'] / 2**20:7.0f} MB "
        f"= {mem['tracemalloc_peak'] / mem['matrix']:.2f}x"
    )
    print(
        f"  peak RSS growth during fit:  {mem['rss_growth'] / 2**20:7.0f} MB "
        f"= {mem['rss_growth'] / mem['matrix']:.2f}x "
        f"(process peak RSS {mem['rss_peak'] / 2**20:.0f} MB)"
    )


if __name__ == "__main__":
    main()
