"""FedChi2Selector speed and memory (issue 12, target 4), ratios from one run.

Three measurements, side by side:

1. *Many small clients*: 10,000 clients x 5 rows, 20 Poisson features,
   3 classes, the default selector (l = 50, Harary-graph masks). Target:
   <= 2 s. The unmasked protocol (``secure_agg="none"``, the same bits) and
   sklearn's pooled ``chi2`` are timed beside it.
2. *Masked vs unmasked*: d = 10**4 features, C = 20 classes, 100 clients,
   l = 50 (the synthetic counts of ``bench_fed_chi2.py``). Target: the
   default masked protocol within 1.5x the unmasked one.
3. *Peak memory*: 2 clients x 500,000 rows x 20 features (``tracemalloc``
   peak during ``fit``, above the input arrays), as a ratio to X's size.

Every run also checks that the masked and the unmasked sketches are bit
for bit equal (the masks cancel exactly). Times are the best of
``--repeats`` runs, in CPU seconds of this single-threaded process (robust
to other processes on a shared machine) and wall seconds. Run:
``python benchmarks/bench_fed_chi2_speed.py [--repeats R] [--seed S]``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import save_record  # noqa: E402
from bench_fed_chi2 import synthetic_counts  # noqa: E402
from sklearn.feature_selection import chi2  # noqa: E402

from skfedcp.feature_selection import FedChi2Selector  # noqa: E402


def _best(func, repeats):
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = func()
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu, out


def _fit(X, y, clients, seed, **params):
    def run():
        return FedChi2Selector(k=10, random_state=seed, **params).fit(
            X, y, client_ids=clients
        )

    return run


def many_clients(seed, repeats):
    rng = np.random.default_rng(seed)
    n_clients, rows, d = 10_000, 5, 20
    X = rng.poisson(2.0, (n_clients * rows, d)).astype(float)
    y = rng.integers(0, 3, n_clients * rows)
    clients = np.repeat(np.arange(n_clients), rows)
    out = {}
    for label, func in [
        ("sklearn chi2 (pooled)", lambda: chi2(X, y)),
        ("FedChi2Selector default (harary masks)", _fit(X, y, clients, seed)),
        (
            "FedChi2Selector secure_agg='none'",
            _fit(X, y, clients, seed, secure_agg="none"),
        ),
    ]:
        out[label] = _best(func, repeats)
    return out


def masked_vs_unmasked(seed, repeats):
    X, y, clients = synthetic_counts(seed)
    out = {}
    for label, params in [
        ("unmasked (secure_agg='none')", {"secure_agg": "none"}),
        ("default masks (harary)", {}),
    ]:
        out[label] = _best(_fit(X, y, clients, seed, **params), repeats)
    return out


def peak_memory(seed):
    rng = np.random.default_rng(seed)
    n = 1_000_000
    X = rng.poisson(2.0, (n, 20)).astype(float)
    y = rng.integers(0, 3, n)
    clients = np.repeat([0, 1], n // 2)
    tracemalloc.start()
    FedChi2Selector(k=10, random_state=seed).fit(X, y, client_ids=clients)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, X.nbytes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()

    small = many_clients(args.seed, args.repeats)
    big = masked_vs_unmasked(args.seed, args.repeats)
    masked = big["default masks (harary)"][2]
    plain = big["unmasked (secure_agg='none')"][2]
    identical = bool(np.array_equal(masked.sketch_, plain.sketch_))
    peak, x_bytes = peak_memory(args.seed)

    rows = []
    print("\n== 1. 10,000 clients x 5 rows x 20 features (target <= 2 s) ==")
    print(f"{'variant':42s} {'wall s':>8s} {'CPU s':>8s}")
    for label, (wall, cpu, _) in small.items():
        print(f"{label:42s} {wall:8.3f} {cpu:8.3f}")
        rows.append(
            {"study": "10k clients", "variant": label, "wall": wall, "cpu": cpu}
        )
    print("\n== 2. d=1e4, C=20, 100 clients, l=50 (target masked <= 1.5x) ==")
    base = big["unmasked (secure_agg='none')"]
    print(f"{'variant':42s} {'wall s':>8s} {'CPU s':>8s} {'CPU ratio':>10s}")
    for label, (wall, cpu, _) in big.items():
        ratio = cpu / base[1]
        print(f"{label:42s} {wall:8.3f} {cpu:8.3f} {ratio:10.2f}")
        rows.append(
            {
                "study": "d=1e4",
                "variant": label,
                "wall": wall,
                "cpu": cpu,
                "ratio": ratio,
            }
        )
    print(f"masked and unmasked sketches bit-identical: {identical}")
    print("\n== 3. 2 clients x 500,000 rows x 20 features: peak memory in fit ==")
    print(
        f"peak above the inputs {peak / 2**20:.1f} MB = {peak / x_bytes:.2f} x "
        f"X ({x_bytes / 2**20:.1f} MB)"
    )
    wall = time.perf_counter() - start
    path = save_record(
        "bench_fed_chi2_speed",
        {
            "seed": args.seed,
            "repeats": args.repeats,
            "rows": rows,
            "bit_identical": identical,
            "peak_bytes": peak,
            "x_bytes": x_bytes,
            "wall_seconds": wall,
        },
    )
    print(f"\nwall time {wall:.1f} s; record written to {path}")


if __name__ == "__main__":
    main()
