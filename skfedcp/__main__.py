"""Command line: ``python -m skfedcp demo`` (also the ``skfedcp`` console script).

The demo calibrates one model across the natural clients of a real table with
three strategies (pooled ``central`` split conformal, one-shot ``qq`` and the
``avg`` baseline), over many random calibration/test splits, and compares the
mean coverage with the coverage each strategy guarantees.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # imported lazily: the command line starts fast
    import pandas as pd

__all__ = ["main", "run_demo"]

STRATEGIES = ("central", "qq", "avg")
_DEMO_DESCRIPTION = (
    "Calibrate one model across the natural clients of a real table with three "
    "strategies (pooled 'central' split conformal, one-shot 'qq' and the 'avg' "
    "baseline) over many random calibration/test splits; print the mean coverage "
    "and width against the coverage each strategy guarantees, the per-client "
    "coverage, and save a per-client coverage figure."
)
DEFAULT_OUTPUT = "skfedcp_demo_client_coverage.png"


def _progress(message: str) -> None:
    print(f"[skfedcp demo] {message}", file=sys.stderr, flush=True)


def _guarantee(cal, alpha):
    """Lower coverage bound of a fitted calibrator, or None."""
    import numpy as np

    lower = float(cal.coverage_bounds(cal.n_per_client_, alpha).lower)
    return None if np.isnan(lower) else lower


def _smallest_finite_alpha(name: str, client_ids: Any, alpha: float) -> float | None:
    """Smallest ``alpha`` (within 0.1%) giving ``name`` a finite threshold.

    For these rank-based strategies the threshold is infinite when the rank
    they need exceeds the number of scores: it depends on the client sizes
    and ``alpha`` only, not on the scores' values, so ranks stand in for them.
    The search is a bisection on a log scale between ``alpha`` (infinite) and
    0.5; ``None`` when even 0.5 gives an infinite threshold.
    """
    import numpy as np

    from .calibrators import get_calibrator
    from .exceptions import SmallCalibrationSetWarning

    ranks = np.arange(len(client_ids), dtype=float)

    def finite(level: float) -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallCalibrationSetWarning)
            cal = get_calibrator(name).fit(ranks, client_ids, alpha=level)
        return bool(np.isfinite(cal.threshold_))

    low, high = alpha, 0.5
    if not finite(high):
        return None
    while high / low > 1.001:
        mid = float(np.sqrt(low * high))
        low, high = (low, mid) if finite(mid) else (mid, high)
    return high


def _report_infinite(infinite, alpha, cal_ids, sizes):
    """Explain, in words, the strategies whose threshold was +inf."""
    names = ", ".join(infinite)
    print(
        f"\nThe calibration set is too small for alpha={alpha:g} with {names}: "
        f"{'its' if len(infinite) == 1 else 'their'} threshold q is +inf, so "
        "every interval is the whole real line (-inf, +inf): coverage 1 and "
        "infinite width, valid but uninformative. Clients hold "
        f"{min(sizes)} to {max(sizes)} calibration rows ({sum(sizes)} in all). "
        "A finite threshold needs a larger alpha (or more calibration rows):"
    )
    for name in infinite:
        smallest = _smallest_finite_alpha(name, cal_ids, alpha)
        need = "none up to 0.5" if smallest is None else f"alpha >= {smallest:.3g}"
        print(f"  {name}: {need}")


def run_demo(
    dataset: str = "randhie",
    alpha: float = 0.1,
    *,
    n_splits: int = 50,
    random_state: int = 0,
    output: str | os.PathLike | None = DEFAULT_OUTPUT,
) -> pd.DataFrame:
    """Calibrate a model across a real table's natural clients; print a report.

    Each client's rows are split once: half train one model (fitted once),
    the other half is split again, ``n_splits`` times at random, into
    calibration and test rows (half each, within each client, so that client
    sizes and hence the guarantees stay fixed). For each split, the model is
    calibrated with ``central``, ``qq`` and ``avg`` and the intervals are
    scored on the test rows.

    Parameters
    ----------
    dataset : {"randhie", "bikeshare"}, default="randhie"
        RandHIE split by its 6 study sites, or Bikeshare split by month.
    alpha : float, default=0.1
        Target miscoverage: intervals should cover ``1 - alpha``.
    n_splits : int, default=50
        Number of random calibration/test splits.
    random_state : int, default=0
        Seed of the training split, the model and the calibration/test splits.
    output : str or None, default="skfedcp_demo_client_coverage.png"
        Where to save the per-client coverage figure (first split); ``None``
        draws none. Skipped, with a message, when matplotlib is missing.

    Returns
    -------
    report : pandas.DataFrame
        One row per strategy: mean and standard error of coverage and width
        over the splits, mean threshold and guaranteed coverage.
    """
    import numpy as np
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingRegressor

    from . import datasets
    from .calibrators import get_calibrator
    from .exceptions import SmallCalibrationSetWarning
    from .metrics import coverage_score, mean_width_score, per_client_coverage

    loaders: dict[str, Callable[..., Any]] = {
        "randhie": datasets.load_randhie,
        "bikeshare": datasets.load_bikeshare,
    }
    t0 = time.perf_counter()
    _progress(f"loading {dataset} (shipped in a package, no network)")
    X, y, client_ids = loaders[dataset](return_X_y=True)
    rng = np.random.default_rng(random_state)
    clients = np.unique(client_ids)
    train = np.zeros(len(y), dtype=bool)
    pools = []  # per client: its members that calibrate or test
    for c in clients:
        members = rng.permutation(np.flatnonzero(client_ids == c))
        train[members[: len(members) // 2]] = True
        pools.append(members[len(members) // 2 :])
    _progress(
        f"fitting HistGradientBoostingRegressor on {train.sum()} rows of "
        f"{len(clients)} clients"
    )
    model = HistGradientBoostingRegressor(random_state=random_state)
    model.fit(X[train], y[train])
    # The model is fixed: predict once. The threshold of each strategy is
    # what FedConformalRegressor(FrozenEstimator(model), calibrator=name)
    # computes, from the absolute residuals; intervals are prediction ± q.
    pred = model.predict(X)
    residuals = np.abs(y - pred)

    n_cal = np.array([len(p) // 2 for p in pools])
    n_test = np.array([len(p) - len(p) // 2 for p in pools])
    records: dict[str, dict[str, list[float]]] = {
        name: {"coverage": [], "width": [], "threshold": []} for name in STRATEGIES
    }
    per_client = {name: np.empty((n_splits, len(clients))) for name in STRATEGIES}
    guarantees = {}
    first_split = {}
    _progress(
        f"calibrating with {', '.join(STRATEGIES)} on {n_splits} random "
        f"calibration/test splits of the other {n_cal.sum() + n_test.sum()} rows"
    )
    for split in range(n_splits):
        cal_rows, test_rows = [], []
        for pool, k in zip(pools, n_cal, strict=True):
            perm = rng.permutation(pool)
            cal_rows.append(perm[:k])
            test_rows.append(perm[k:])
        cal, test = np.concatenate(cal_rows), np.concatenate(test_rows)
        for name in STRATEGIES:
            with warnings.catch_warnings():
                # An infinite threshold is explained once, after the table.
                warnings.simplefilter("ignore", SmallCalibrationSetWarning)
                calibrator = get_calibrator(name).fit(
                    residuals[cal], client_ids[cal], alpha=alpha
                )
            q = calibrator.threshold_
            intervals = np.column_stack([pred[test] - q, pred[test] + q])
            rec = records[name]
            rec["coverage"].append(coverage_score(y[test], intervals))
            rec["width"].append(mean_width_score(intervals))
            rec["threshold"].append(q)
            res = per_client_coverage(y[test], intervals, client_ids[test])
            per_client[name][split] = res.coverage
            if split == 0:
                guarantees[name] = _guarantee(calibrator, alpha)
                first_split[name] = (y[test], intervals, client_ids[test])
    _progress(f"done in {time.perf_counter() - t0:.1f} s")

    def mean_se(values):
        values = np.asarray(values, dtype=float)
        if values.size < 2 or not np.isfinite(values).all():
            return values.mean(), np.nan  # no spread around an infinite width
        return values.mean(), values.std(ddof=1) / np.sqrt(values.size)

    def shown(mean, se, digits):
        if np.isinf(mean):
            return "inf (whole line)"
        return f"{mean:.{digits}f} ± {se:.{digits}f}"

    rows = []
    for name in STRATEGIES:
        cov, cov_se = mean_se(records[name]["coverage"])
        width, width_se = mean_se(records[name]["width"])
        bound = guarantees[name]
        if bound is None:
            versus = "no guarantee"
        elif np.isnan(cov_se) or cov_se == 0:
            versus = f"{cov - bound:+.4f}"
        else:
            versus = f"{(cov - bound) / cov_se:+.1f} SE"
        rows.append(
            {
                "strategy": name,
                "coverage": shown(cov, cov_se, 4),
                "width": shown(width, width_se, 3),
                "threshold": np.mean(records[name]["threshold"]),
                "guarantee": "none" if bound is None else f">= {bound:.4f}",
                "coverage - guarantee": versus,
                "_coverage": cov,
                "_coverage_se": cov_se,
                "_width": width,
                "_width_se": width_se,
                "_guarantee": np.nan if bound is None else bound,
            }
        )
    table = pd.DataFrame(rows).set_index("strategy")
    columns = [c for c in table.columns if not c.startswith("_")]

    print(
        f"\nskfedcp demo: {dataset}, {len(clients)} clients, alpha={alpha}\n"
        f"Target: each strategy aims at coverage >= 1 - alpha = {1 - alpha:g}, i.e. "
        "a new row falls inside its interval with that probability, on average "
        "over calibration sets.\n"
        "Threshold: the calibrated quantile q of the calibration residuals "
        "|y - f(x)|; every interval is f(x) ± q (width 2q).\n"
        f"Model fitted once on {train.sum()} rows; {n_splits} random splits of the "
        f"remaining rows into {n_cal.sum()} calibration and {n_test.sum()} test "
        "rows (half each within every client). Mean ± standard error over splits:"
    )
    with pd.option_context("display.float_format", "{:.3f}".format):
        print(table[columns].to_string())
    sd = np.std(records["central"]["coverage"], ddof=1) if n_splits > 1 else np.nan
    print(
        "guarantee: the coverage each strategy guarantees at these client sizes, "
        "exactly, if calibration and test rows are exchangeable (avg has none). "
        f"One split's coverage scatters by about ±{sd:.3f} around it; the mean of "
        f"{n_splits} splits by ± its SE, so 'coverage - guarantee' within about "
        "-2 SE is what the guarantee predicts."
    )

    infinite = [n for n in STRATEGIES if np.isinf(records[n]["threshold"]).any()]
    if infinite:
        _report_infinite(infinite, alpha, client_ids[cal], n_cal)

    site_table = pd.DataFrame({"client": clients, "n_cal": n_cal, "n_test": n_test})
    for name in STRATEGIES:
        site_table[name] = per_client[name].mean(axis=0)
    from scipy import stats

    low = stats.binom.ppf(0.025, n_test, 1 - alpha) / n_test
    high = stats.binom.ppf(0.975, n_test, 1 - alpha) / n_test
    site_table["one split's 95% range"] = [
        f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(low, high, strict=True)
    ]
    print(
        f"\nPer-client test coverage, mean over the {n_splits} splits (one split "
        f"varies within the binomial range at n_test if the client's coverage is "
        f"{1 - alpha:g}):"
    )
    with pd.option_context("display.float_format", "{:.4f}".format):
        print(site_table.to_string(index=False))

    if output is not None:
        _save_figure(output, first_split, guarantees, alpha, n_splits)
    table.attrs["per_client"] = site_table
    return table


def _save_figure(output, first_split, guarantees, alpha, n_splits):
    """Per-client coverage of the first split, one panel per strategy."""
    try:
        from matplotlib.figure import Figure  # no pyplot: leaves the backend alone
    except ImportError:
        print(
            "\nmatplotlib is not installed: no figure saved "
            '(pip install "skfedcp[plot]" to get one).'
        )
        return None
    from .plotting import ClientCoverageDisplay

    fig = Figure(figsize=(4.2 * len(STRATEGIES), 4), layout="constrained")
    axes = fig.subplots(1, len(STRATEGIES), sharey=True)
    for ax, name in zip(axes, STRATEGIES, strict=True):
        y_true, intervals, ids = first_split[name]
        ClientCoverageDisplay.from_predictions(
            y_true,
            intervals,
            client_ids=ids,
            alpha=alpha,
            guarantee=guarantees[name],
            ax=ax,
            name=name,
        )
        ax.set_title(name)
        if ax is not axes[0]:
            ax.set_ylabel("")
    fig.suptitle(f"Per-client test coverage, split 1 of {n_splits}")
    fig.savefig(output, dpi=120)
    print(f"\nSaved the per-client coverage figure to {os.path.abspath(output)}")
    return output


class _ArgumentParser(argparse.ArgumentParser):
    """Report a bad option in one line (exit status 2), without the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1); got {text!r}")
    return value


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"must be an integer in [{lo}, {hi}]; got {text!r}"
            )
        return value

    return check


def _build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="skfedcp",
        description="Federated and private conformal prediction for scikit-learn.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    demo = sub.add_parser(
        "demo",
        help="federated calibration on a bundled real table",
        description=_DEMO_DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.set_defaults(parser=demo)  # reports the demo's own errors
    demo.add_argument(
        "--dataset",
        choices=["randhie", "bikeshare"],
        default="randhie",
        help="table and its natural clients: RandHIE by its 6 study sites, or "
        "Bikeshare by its 12 months",
    )
    demo.add_argument(
        "--alpha",
        type=_alpha,
        default=0.1,
        help="target miscoverage in (0, 1): intervals aim at coverage 1 - alpha",
    )
    demo.add_argument(
        "--n-splits",
        type=_int_in(1, 1000),
        default=50,
        help="number of random calibration/test splits averaged over (the "
        "guarantee is an average over calibration sets)",
    )
    demo.add_argument(
        "--seed",
        type=_int_in(0, 2**32 - 1),
        default=0,
        help="seed of the training split, the model and the calibration/test splits",
    )
    demo.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="PATH",
        help="PNG file for the per-client coverage figure (needs matplotlib, "
        'pip install "skfedcp[plot]")',
    )
    demo.add_argument(
        "--no-plot", action="store_true", help="do not draw or save the figure"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m skfedcp``; returns the exit status."""
    parser = _build_parser()
    # argparse reports a sub-command's unknown option from the top parser
    # ("see 'skfedcp --help'"), whose help does not list it: parse the known
    # ones and let the sub-command's parser report the rest.
    args, unknown = parser.parse_known_args(argv)
    command = args.parser
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "demo":
        output = None if args.no_plot else args.output
        if output is not None:
            folder = os.path.dirname(os.path.abspath(output))
            if not os.path.isdir(folder):
                command.error(f"argument --output: folder {folder!r} does not exist")
        try:
            run_demo(
                args.dataset,
                alpha=args.alpha,
                n_splits=args.n_splits,
                random_state=args.seed,
                output=output,
            )
        except ImportError as exc:  # the datasets extra is missing
            print(f"skfedcp demo: error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
