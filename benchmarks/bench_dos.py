"""Denial of service by announcement: server time and peak memory per strategy.

What a client announces before a round (its size, its presence) is checked
against the public plan policy before the server does any work that grows
with it. Each cell here runs the server's first step on the announcements,
in a fresh Python process (imports done before the clock starts), and
reports its wall time, its peak traced memory (``tracemalloc``: Python and
NumPy allocations) and whether it planned or refused:

* calibrators (central, qq, avg, dp-central, dp-qq, ldp-l): ``plan(sizes,
  alpha)``, the public plan every server path computes before reading a
  message; ldp-s: ``server_init(sizes)`` (the group assignment); FED-chi2:
  ``chi2_server_plan`` (round one's plan from the sizes and bounds);
* announced ``n``: nine honest clients of 1,000 rows and one announcing
  ``10**3`` (the truthful federation), ``10**8``, ``10**12`` or ``2**62``;
* clients: 10, ``10**4`` or ``10**5`` clients of distinct sizes (100, 101,
  ...), under the default plan policy (``max_clients = 10**5``); for qq
  also ``10**4`` and ``10**5`` clients of 10-1,000 rows (random sizes), the
  largest federations the default ``max_total_size = 10**8`` admits; for
  FED-chi2 also ``10**4`` and ``10**5`` clients of which the last announces
  a NaN bound (left out of the round, ``on_invalid="exclude"``: what one
  invalid client costs the server);
* ``ldp-s s=0.5``: LDP-S with ``max_client_share=0.5``, which refuses one
  client claiming most of the users. LDP-S's group assignment is held as
  counts per (client, group) and a public key (``O(m T)``), so its cost
  does not grow with the announced users; for ldp-s also one client
  announcing ``9 x 10**7`` (the largest the default ``max_total_size``
  admits beside nine clients of 1,000) and ``10**4`` / ``10**5`` clients of
  10-1,000 users.

A refusal (the plan policy's ``max_client_size = 10**9``) is an
``InvalidMessageError`` naming the client and field; a cell still running
after ``--budget`` seconds is reported as ``> budget``.

Run: ``python benchmarks/bench_dos.py [--quick] [--budget SECONDS]``.
"""

import argparse
import json

import _common

ALPHA = 0.1
STRATEGIES = {
    "central": ("central", {}),
    "qq": ("qq", {}),
    "avg": ("avg", {}),
    "dp-central": ("dp-central", {"epsilon": 1.0, "score_bounds": (0.0, 1.0)}),
    "dp-qq": ("dp-qq", {"epsilon": 1.0, "score_bounds": (0.0, 1.0)}),
    "ldp-l": ("ldp-l", {"epsilon": 2.0, "n_classes": 3}),
    "ldp-s": ("ldp-s", {"epsilon": 4.0, "score_bounds": (0.0, 1.0)}),
    # With the public cap on one client's share of the users: the size that
    # LDP-S's group assignment grows with is refused before any work.
    "ldp-s s=0.5": (
        "ldp-s",
        {"epsilon": 4.0, "score_bounds": (0.0, 1.0), "max_client_share": 0.5},
    ),
    "FED-chi2": ("FED-chi2", {}),
}
ANNOUNCED = [("10^3", 10**3), ("10^8", 10**8), ("10^12", 10**12), ("2^62", 2**62)]
CLIENTS = [("10", 10), ("10^4", 10**4), ("10^5", 10**5)]
#: QQ and LDP-S only: clients of 10-1,000 rows (10^5 of them hold ~5 x 10^7
#: rows in all, inside ``max_total_size = 10**8``, where distinct sizes are
#: refused).
MIXED = [("10^4", 10**4), ("10^5", 10**5)]
#: LDP-S only: one client announcing the most users the default policy admits
#: beside the nine honest ones (an announced size inside the bounds).
LDP_S_INSIDE = [("9x10^7", 9 * 10**7)]
N_FEATURES = 20


def _sizes(spec):
    import numpy as np

    if spec["kind"] == "n":
        return np.array([1000] * 9 + [spec["value"]], dtype=np.uint64)
    if spec["kind"] == "mixed":  # sizes 10-1,000: inside the default policy
        rng = np.random.default_rng(0)
        return rng.integers(10, 1001, size=spec["value"]).astype(np.int64)
    return 100 + np.arange(spec["value"], dtype=np.int64)


def run_cell(spec):
    """In the child: one server step on the announcements, timed and traced."""
    import time
    import tracemalloc
    import warnings

    import numpy as np

    from skfedcp.calibrators import get_calibrator
    from skfedcp.feature_selection import chi2_server_plan

    sizes = _sizes(spec)
    name, params = STRATEGIES[spec["strategy"]]
    if name == "FED-chi2":
        bounds = np.ones((sizes.shape[0], N_FEATURES))
        on_invalid = "raise"  # a refusal, as above
        if spec["kind"] == "invalid":  # the last client's bound is NaN: left out
            bounds[-1, 0] = np.nan
            on_invalid = "exclude"

        def step():
            chi2_server_plan(
                sizes.tolist(),
                bounds,
                n_classes=3,
                n_features=N_FEATURES,
                integer_x=True,
                on_invalid=on_invalid,
            )

    else:
        calibrator = get_calibrator(name).set_params(**params)
        if name == "ldp-s":

            def step():
                calibrator.server_init(sizes, alpha=ALPHA, random_state=0)

        else:

            def step():
                calibrator.plan(sizes, ALPHA)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tracemalloc.start()
        start = time.perf_counter()
        try:
            step()
            outcome = "planned"
        except Exception as exc:  # a refusal is a result here
            outcome = f"refused ({type(exc).__name__})"
        took = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return {"seconds": took, "peak_mb": peak / 2**20, "outcome": outcome}


def _child(spec, budget):
    """Run one cell in a fresh interpreter (this checkout); None if over budget."""
    return _common.run_fresh(__file__, "cell", spec, budget)


def _shown(result, budget):
    if result is None:
        return f"> {budget:.0f} s", "over budget"
    return (
        f"{1000 * result['seconds']:9.1f} ms {result['peak_mb']:8.2f} MB",
        result["outcome"],
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cells")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        print(json.dumps(run_cell(json.loads(args.cell))))
        return
    strategies = ["qq", "ldp-s s=0.5", "FED-chi2"] if args.quick else list(STRATEGIES)
    clients = CLIENTS[:2] if args.quick else CLIENTS
    rows = []
    print(f"{'strategy':12s} {'announced':>16s} {'time':>12s} {'peak':>11s}  outcome")
    for name in strategies:
        announced = ANNOUNCED
        if name.startswith("ldp-s"):  # inside the bounds, then beyond them
            announced = [ANNOUNCED[0], *LDP_S_INSIDE, *ANNOUNCED[1:]]
        cells = [("n", label, value) for label, value in announced]
        cells += [("clients", label, value) for label, value in clients]
        if name == "qq" or name.startswith("ldp-s"):  # the most clients admitted
            cells += [("mixed", label, value) for label, value in MIXED]
        if name == "FED-chi2":  # one invalid announcement among many
            cells += [("invalid", label, value) for label, value in clients[1:]]
        for kind, label, value in cells:
            spec = {"strategy": name, "kind": kind, "value": value}
            result = _child(spec, args.budget)
            shown, outcome = _shown(result, args.budget)
            what = {
                "n": f"n = {label}",
                "clients": f"{label} clients",
                "invalid": f"{label}, 1 invalid",
            }.get(kind, f"{label} x 10-1,000")
            print(f"{name:12s} {what:>16s} {shown}  {outcome}", flush=True)
            rows.append({**spec, "label": label, "result": result})
    path = _common.save_record("bench_dos", {"cells": rows, "budget": args.budget})
    print(f"record: {path}")


if __name__ == "__main__":
    main()
