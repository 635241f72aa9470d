"""Timing and tables shared by the bench_vs_mapie_* scripts (not a benchmark).

Import after ``_common`` (which pins BLAS to one thread before NumPy loads).
"""

import time


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
