"""Shared benchmark helpers: single-threaded BLAS, timing, result records."""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402
from pathlib import Path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def best_time(func, *, repeat=7, min_time=0.2):
    """Best-of-``repeat`` seconds per call, each repeat running >= ``min_time``."""
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    while number * _ < min_time and number < 10**6:
        number *= 2
        _ = timer.timeit(number) / number
    return min(timer.repeat(repeat=repeat, number=number)) / number


def compare_times(funcs, *, repeat=15, min_time=0.05, clock=timeit.default_timer):
    """Best seconds per call of each function, timed in interleaved rounds.

    Interleaving (a, b, c, a, b, c, ...) exposes every function to the same
    background load, so ratios stay meaningful on a shared, noisy machine.
    ``clock``: wall time by default; ``time.process_time`` for CPU time.
    """
    timers = {name: timeit.Timer(func, timer=clock) for name, func in funcs.items()}
    numbers = {}
    for name, timer in timers.items():
        number, took = timer.autorange()
        numbers[name] = max(1, int(number * min_time / max(took, 1e-9)))
    best = dict.fromkeys(funcs, float("inf"))
    for _ in range(repeat):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(numbers[name]) / numbers[name])
    return best


def run_fresh(script, flag, spec, budget):
    """Run ``script --flag <spec as JSON>`` in a fresh interpreter; its last
    stdout line, parsed as JSON, or None if it runs over ``budget`` seconds.

    The child imports the checkout ``script`` lives in, not an installed
    copy (``PYTHONPATH`` first holds the checkout's root).
    """
    script = Path(script).resolve()
    root = str(script.parent.parent)
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    cmd = [sys.executable, str(script), f"--{flag}", json.dumps(spec)]
    try:
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=budget,
            check=True,
            cwd=script.parent,
            env={**os.environ, "PYTHONPATH": path},
        )
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def versions():
    import numpy
    import scipy
    import sklearn

    import skfedcp

    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "skfedcp": skfedcp.__version__,
        "machine": platform.machine(),
    }


def save_record(name, payload):
    """Write a JSON record (versions, settings, results) to benchmarks/results/."""
    RESULTS.mkdir(exist_ok=True)
    record = {
        "benchmark": name,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "versions": versions(),
        **payload,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, default=float))
    return path
