"""Timing and tables shared by the bench_vs_mapie_* scripts (not a benchmark).

Import after ``_common`` (which pins BLAS to one thread before NumPy loads).
"""

import argparse
import time

import numpy as np

QUICK_ROWS = 20_000


def size_parser(description):
    """The options every comparison shares: sizes, rounds and ``--quick``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n-cal", type=int, default=200_000)
    parser.add_argument("--n-test", type=int, default=200_000)
    parser.add_argument("--n-features", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20k + 20k rows")
    return parser


def parse_sizes(parser, argv):
    """Parse ``argv``; ``--quick`` sets both row counts to 20,000."""
    args = parser.parse_args(argv)
    if args.quick:
        args.n_cal = args.n_test = QUICK_ROWS
    return args


def split_blocks(X, y, n_train, n_cal):
    """Train, calibration and test blocks, each C-contiguous (as a user's)."""
    split = np.cumsum([n_train, n_cal])
    return [np.ascontiguousarray(p) for p in np.split(X, split)], np.split(y, split)


def interleaved_best(funcs, *, repeat):
    """Best wall-clock and best CPU seconds of each function, interleaved rounds.

    Every function runs once per round (after one warm-up call each), so all
    see the same background load. CPU time (``time.process_time``; the runs
    are single-threaded) does not count the time the process waits for a
    core, which on a shared machine is most of the noise; the wall-clock
    time is the one a user sees.
    """
    for func in funcs.values():
        func()
    wall = dict.fromkeys(funcs, float("inf"))
    cpu = dict.fromkeys(funcs, float("inf"))
    for _ in range(repeat):
        for name, func in funcs.items():
            w0, c0 = time.perf_counter(), time.process_time()
            func()
            c1, w1 = time.process_time(), time.perf_counter()
            wall[name] = min(wall[name], w1 - w0)
            cpu[name] = min(cpu[name], c1 - c0)
    return wall, cpu


def print_table(wall, cpu, goals, *, base):
    """Print ms and the ratio to ``base`` for each contender; return a record."""
    print(
        f"{'contender':36s} {'wall ms':>8s} {'ratio':>7s} {'cpu ms':>8s} "
        f"{'ratio':>7s}  goal"
    )
    record = {}
    for name in wall:
        rw, rc = wall[name] / wall[base], cpu[name] / cpu[base]
        print(
            f"{name:36s} {wall[name] * 1e3:8.2f} {rw:6.2f}x "
            f"{cpu[name] * 1e3:8.2f} {rc:6.2f}x  {goals.get(name, '')}"
        )
        record[name] = {
            "wall_seconds": wall[name],
            "cpu_seconds": cpu[name],
            "wall_ratio": rw,
            "cpu_ratio": rc,
        }
    return record


def versus(wall, cpu, ours, peer):
    """``"ours / peer: wall x, cpu y"``: below 1 means faster than the peer."""
    return (
        f"  {ours} / {peer}: wall {wall[ours] / wall[peer]:.2f}, "
        f"cpu {cpu[ours] / cpu[peer]:.2f}"
    )
