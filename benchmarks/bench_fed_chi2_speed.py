"""FedChi2Selector speed and memory (issue 12, target 4), ratios from one run.

Three measurements, side by side:

1. *Many small clients*: 10,000 clients x 5 rows, 20 Poisson features,
   3 classes, the default selector (l = 50, Harary-graph masks). Goal:
   <= 2 s. The unmasked protocol (``secure_agg="none"``, the same bits) and
   sklearn's pooled ``chi2`` are timed beside it.
2. *Masked vs unmasked*: d = 10**4 features, C = 20 classes, 100 clients,
   l = 50 (the synthetic counts of ``bench_fed_chi2.py``). Goal: the
   default masked protocol within 1.5x the unmasked one. The masks come from
   AES-128-CTR (``cryptography``, a dependency of skfedcp).
3. *Peak memory*: 2 clients x 500,000 rows x 20 features, in a fresh
   process: the ``tracemalloc`` peak during ``fit`` (numpy's allocations,
   above the inputs), and the process's peak resident set size during
   ``fit`` (``VmHWM``, reset just before ``fit``), in total and above what
   it held just before ``fit``.

Every run also checks that the masked and the unmasked sketches are bit
for bit equal (the masks cancel exactly). Times are the best of
``--repeats`` rounds in which the variants run one after the other
(interleaved, so that they share the background load of a busy machine), in
CPU seconds of this single-threaded process and in wall seconds; ratios use
CPU seconds. Run: ``python benchmarks/bench_fed_chi2_speed.py [--repeats R]
[--seed S]``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import save_record  # noqa: E402
from bench_fed_chi2 import synthetic_counts  # noqa: E402
from sklearn.feature_selection import chi2  # noqa: E402

from skfedcp.feature_selection import FedChi2Selector  # noqa: E402

GOAL_SECONDS = 2.0
GOAL_RATIO = 1.5


def _interleaved(funcs, repeats):
    """Best (wall, CPU) seconds of each function, over interleaved rounds."""
    best = {name: [float("inf"), float("inf"), None] for name in funcs}
    for _ in range(repeats):
        for name, func in funcs.items():
            t, c = time.perf_counter(), time.process_time()
            out = func()
            entry = best[name]
            entry[0] = min(entry[0], time.perf_counter() - t)
            entry[1] = min(entry[1], time.process_time() - c)
            entry[2] = out
    return {name: tuple(v) for name, v in best.items()}


def _fit(X, y, clients, seed, **params):
    def run():
        selector = FedChi2Selector(k=10, random_state=seed, **params)
        return selector.fit(X, y, client_ids=clients)

    return run


def many_clients(seed, repeats):
    rng = np.random.default_rng(seed)
    n_clients, rows, d = 10_000, 5, 20
    X = rng.poisson(2.0, (n_clients * rows, d)).astype(float)
    y = rng.integers(0, 3, n_clients * rows)
    clients = np.repeat(np.arange(n_clients), rows)
    return _interleaved(
        {
            "sklearn chi2 (pooled)": lambda: chi2(X, y),
            "FedChi2Selector default (harary masks)": _fit(X, y, clients, seed),
            "FedChi2Selector secure_agg='none'": _fit(
                X, y, clients, seed, secure_agg="none"
            ),
        },
        repeats,
    )


def masked_vs_unmasked(seed, repeats):
    X, y, clients = synthetic_counts(seed)
    return _interleaved(
        {
            "unmasked (secure_agg='none')": _fit(
                X, y, clients, seed, secure_agg="none"
            ),
            "default masks (harary, AES-CTR)": _fit(X, y, clients, seed),
        },
        repeats,
    )


def _status_bytes(field):
    # VmRSS (now) or VmHWM (peak) of this process's memory map. Not
    # ru_maxrss: Linux carries it over from the parent across fork and exec.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_memory(seed):
    """Run in a fresh process (``--memory``): print the measurements as JSON."""
    rng = np.random.default_rng(seed)
    n = 1_000_000
    X = rng.poisson(2.0, (n, 20)).astype(float)
    y = rng.integers(0, 3, n)
    clients = np.repeat([0, 1], n // 2)
    before = _status_bytes("VmRSS")
    # Reset the high-water mark (Linux >= 4.0), which generating X raised.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    tracemalloc.start()
    FedChi2Selector(k=10, random_state=seed).fit(X, y, client_ids=clients)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = _status_bytes("VmHWM")
    print(
        json.dumps(
            {
                "traced_peak": traced,
                "rss_peak": peak,
                "rss_before_fit": before,
                "x_bytes": X.nbytes,
            }
        )
    )


def _memory_in_subprocess(seed):
    out = subprocess.run(
        [sys.executable, __file__, "--memory", "--seed", str(seed)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _met(ok):
    return "yes" if ok else "NO"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--quick", action="store_true", help="one repeat (for make bench)"
    )
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    warnings.simplefilter("ignore")
    if args.memory:
        peak_memory(args.seed)
        return
    start = time.perf_counter()

    small = many_clients(args.seed, args.repeats)
    big = masked_vs_unmasked(args.seed, args.repeats)
    plain = big["unmasked (secure_agg='none')"][2]
    identical = all(
        np.array_equal(out.sketch_, plain.sketch_) for _, _, out in big.values()
    )
    mem = _memory_in_subprocess(args.seed)

    rows = []
    print(
        f"\n== 1. 10,000 clients x 5 rows x 20 features (goal <= {GOAL_SECONDS:g} s) =="
    )
    print(f"{'variant':42s} {'wall s':>8s} {'CPU s':>8s}")
    for label, (wall, cpu, _) in small.items():
        print(f"{label:42s} {wall:8.3f} {cpu:8.3f}")
        rows.append(
            {"study": "10k clients", "variant": label, "wall": wall, "cpu": cpu}
        )
    print(f"\n== 2. d=1e4, C=20, 100 clients, l=50 (goal masked <= {GOAL_RATIO:g}x) ==")
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
    mb = 2.0**20
    traced, x_mb = mem["traced_peak"] / mb, mem["x_bytes"] / mb
    rss, above = mem["rss_peak"] / mb, (mem["rss_peak"] - mem["rss_before_fit"]) / mb
    print("\n== 3. 2 clients x 500,000 rows x 20 features: memory of fit ==")
    print(
        f"tracemalloc peak in fit {traced:.1f} MB ({traced / x_mb:.2f} x X of "
        f"{x_mb:.1f} MB); peak RSS during fit {rss:.0f} MB, of which "
        f"{above:.0f} MB above the RSS just before fit"
    )

    seconds = small["FedChi2Selector default (harary masks)"]
    ratio = big["default masks (harary, AES-CTR)"][1] / base[1]
    print("\n== Goals (issue 12, target 4) ==")
    print(f"{'measure':52s} {'goal':>8s} {'measured':>9s} {'met':>4s}")
    summary = [
        ("10k clients, default selector, CPU s", f"<= {GOAL_SECONDS:g}", seconds[1]),
        ("10k clients, default selector, wall s", f"<= {GOAL_SECONDS:g}", seconds[0]),
        ("d=1e4 masked / unmasked CPU (AES-CTR masks)", f"<= {GOAL_RATIO:g}", ratio),
    ]
    for label, goal, value in summary:
        limit = float(goal.split()[-1])
        print(f"{label:52s} {goal:>8s} {value:9.2f} {_met(value <= limit):>4s}")
    wall = time.perf_counter() - start
    path = save_record(
        "bench_fed_chi2_speed",
        {
            "seed": args.seed,
            "repeats": args.repeats,
            "rows": rows,
            "bit_identical": identical,
            "memory": mem,
            "wall_seconds": wall,
        },
    )
    print(f"\nwall time {wall:.1f} s; record written to {path}")


if __name__ == "__main__":
    main()
