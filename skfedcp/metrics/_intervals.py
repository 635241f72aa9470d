"""Metrics of prediction intervals, overall and per client."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ..federated import ClientPartition
from ..utils._docstrings import fill_doc
from ..utils._validation import check_alpha

__all__ = [
    "PerClientCoverage",
    "coverage_score",
    "interval_score",
    "max_coverage_gap",
    "mean_width_score",
    "per_client_coverage",
]


def _as_float_array(value: ArrayLike, name: str) -> NDArray[np.float64]:
    """``value`` as a float64 array, or a TypeError naming the argument."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of numbers; got {type(value).__name__} "
            "that cannot be converted to float."
        ) from None


def _check_y_intervals(y_intervals: ArrayLike) -> NDArray[np.float64]:
    y_intervals = _as_float_array(y_intervals, "y_intervals")
    if y_intervals.ndim != 2 or y_intervals.shape[1] != 2:
        raise ValueError(
            f"y_intervals must have shape (n_samples, 2); got {y_intervals.shape}."
        )
    if y_intervals.shape[0] == 0:
        raise ValueError("y_intervals is empty: at least one interval is needed.")
    if np.isnan(y_intervals).any():
        rows = np.flatnonzero(np.isnan(y_intervals).any(axis=1))
        raise ValueError(
            f"y_intervals contains NaN (rows {rows[:5].tolist()}); a NaN bound "
            "is neither a hit nor a miss. Infinite bounds are allowed."
        )
    return y_intervals


def _check_y_true_numeric(y_true: ArrayLike) -> NDArray[np.float64]:
    y_true = _as_float_array(y_true, "y_true")
    if y_true.ndim != 1:
        raise ValueError(f"y_true must be 1-D; got shape {y_true.shape}.")
    if not np.isfinite(y_true).all():
        rows = np.flatnonzero(~np.isfinite(y_true))
        raise ValueError(
            f"y_true contains NaN or infinity (rows {rows[:5].tolist()}); true "
            "targets must be finite."
        )
    return y_true


def _check_intervals(
    y_true: ArrayLike, y_intervals: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    y_true = _check_y_true_numeric(y_true)
    y_intervals = _check_y_intervals(y_intervals)
    if y_true.shape[0] != y_intervals.shape[0]:
        raise ValueError(
            f"y_true and y_intervals must have the same number of rows; got "
            f"{y_true.shape[0]} and {y_intervals.shape[0]}."
        )
    return y_true, y_intervals


def _covered(
    y_true: NDArray[np.float64], y_intervals: NDArray[np.float64]
) -> NDArray[np.bool_]:
    return (y_intervals[:, 0] <= y_true) & (y_true <= y_intervals[:, 1])


def _widths(y_intervals: NDArray[np.float64]) -> NDArray[np.float64]:
    """``|upper - lower|`` per row: a crossed interval has a positive width."""
    return np.abs(y_intervals[:, 1] - y_intervals[:, 0])


def coverage_score(y_true: ArrayLike, y_intervals: ArrayLike) -> float:
    """Fraction of targets inside their interval (bounds included).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets.
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds, as returned by ``predict_interval``.

    Returns
    -------
    coverage : float

    Examples
    --------
    >>> coverage_score([1.0, 5.0], [[0.0, 2.0], [0.0, 2.0]])
    0.5
    """
    y_true, y_intervals = _check_intervals(y_true, y_intervals)
    return float(np.mean(_covered(y_true, y_intervals)))


def mean_width_score(y_intervals: ArrayLike) -> float:
    """Mean interval width ``|upper - lower|`` (``inf`` if any is infinite).

    A crossed interval (lower above upper) counts with its absolute width,
    as in MAPIE and puncc; skfedcp's estimators never return one.

    Parameters
    ----------
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds.

    Returns
    -------
    width : float

    Examples
    --------
    >>> mean_width_score([[0.0, 2.0], [1.0, 2.0]])
    1.5
    >>> mean_width_score([[2.0, 0.0]])
    2.0
    """
    return float(np.mean(_widths(_check_y_intervals(y_intervals))))


def interval_score(y_true: ArrayLike, y_intervals: ArrayLike, *, alpha: float) -> float:
    """Mean interval (Winkler) score; lower is better.

    ``width + (2/alpha)·(lower - y)·1[y < lower] + (2/alpha)·(y - upper)·1[y > upper]``,
    a proper scoring rule for the central ``1 - alpha`` interval
    (Gneiting & Raftery, 2007). ``width`` is ``|upper - lower|`` (see
    :func:`mean_width_score`).

    Parameters
    ----------
    y_true, y_intervals
        As in :func:`coverage_score`.
    alpha : float
        Miscoverage level the intervals target.

    Returns
    -------
    score : float

    Examples
    --------
    >>> interval_score([1.0, 3.0], [[0.0, 2.0], [0.0, 2.0]], alpha=0.5)
    4.0
    """
    y_true, y_intervals = _check_intervals(y_true, y_intervals)
    alpha = check_alpha(alpha)
    lower, upper = y_intervals[:, 0], y_intervals[:, 1]
    below = np.maximum(lower - y_true, 0.0)
    above = np.maximum(y_true - upper, 0.0)
    return float(np.mean(_widths(y_intervals) + (2.0 / alpha) * (below + above)))


class PerClientCoverage(NamedTuple):
    """Coverage of each client: ``clients``, ``coverage``, ``n_samples``.

    A named tuple, so ``clients, coverage, n = result`` unpacks it. It prints
    as a short table (the first and last few clients when there are many) and
    :meth:`to_frame` gives every client as a :class:`pandas.DataFrame`.

    Examples
    --------
    >>> res = PerClientCoverage(["a", "b"], [0.5, 1.0], [2, 1])
    >>> res
    PerClientCoverage: 2 clients, coverage min 0.5 / mean 0.75 / max 1
    client  coverage  n_samples
         a    0.5000          2
         b    1.0000          1
    >>> res.to_frame()["coverage"].tolist()
    [0.5, 1.0]
    """

    clients: np.ndarray
    coverage: np.ndarray
    n_samples: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """Every client as a DataFrame indexed by client.

        Returns
        -------
        frame : pandas.DataFrame
            Columns ``coverage`` and ``n_samples``, index ``client``.
        """
        return pd.DataFrame(
            {
                "coverage": np.asarray(self.coverage, dtype=np.float64),
                "n_samples": np.asarray(self.n_samples),
            },
            index=pd.Index(np.asarray(self.clients), name="client"),
        )

    def __repr__(self) -> str:
        cov = np.asarray(self.coverage, dtype=np.float64)
        n = cov.shape[0]
        head = f"PerClientCoverage: {n} client{'s' if n != 1 else ''}"
        if n == 0:
            return head
        head += (
            f", coverage min {cov.min():.4g} / mean {cov.mean():.4g} / "
            f"max {cov.max():.4g}"
        )
        clients = [str(c) for c in np.asarray(self.clients)]
        sizes = [str(int(k)) for k in np.asarray(self.n_samples)]
        rows = (
            list(range(n))
            if n <= _REPR_ROWS
            else [
                *range(_REPR_ROWS // 2),
                None,
                *range(n - _REPR_ROWS // 2, n),
            ]
        )
        w_c = max(len("client"), *(len(clients[i]) for i in rows if i is not None))
        w_n = max(len("n_samples"), *(len(sizes[i]) for i in rows if i is not None))
        lines = [head, f"{'client':>{w_c}}  coverage  {'n_samples':>{w_n}}"]
        for i in rows:
            if i is None:
                lines.append(f"{'...':>{w_c}}  {'...':>8}  {'...':>{w_n}}")
            else:
                lines.append(f"{clients[i]:>{w_c}}  {cov[i]:8.4f}  {sizes[i]:>{w_n}}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.__repr__()


_REPR_ROWS = 10  # clients shown by PerClientCoverage's printout (half each end)


def _per_client(hits: NDArray, client_ids: ArrayLike) -> PerClientCoverage:
    """The mean of ``hits`` (one per row) within each client's rows."""
    part = ClientPartition(client_ids, hits.shape[0])
    covered = np.bincount(part.client_codes(), weights=hits, minlength=part.n_clients)
    return PerClientCoverage(part.clients, covered / part.sizes, part.sizes)


@fill_doc
def per_client_coverage(
    y_true: ArrayLike, y_intervals: ArrayLike, client_ids: ArrayLike
) -> PerClientCoverage:
    """Coverage within each client's rows.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets.
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds.
    client_ids : array-like of shape (n_samples,)
        Client of each row.

    %(returns_per_client_coverage)s

    Examples
    --------
    >>> res = per_client_coverage([1, 5, 1], [[0, 2]] * 3, ["a", "a", "b"])
    >>> res.clients.tolist(), res.coverage.tolist()
    (['a', 'b'], [0.5, 1.0])
    """
    y_true, y_intervals = _check_intervals(y_true, y_intervals)
    return _per_client(_covered(y_true, y_intervals), client_ids)


def max_coverage_gap(
    y_true: ArrayLike,
    y_intervals: ArrayLike,
    client_ids: ArrayLike,
    *,
    alpha: float | None = None,
) -> float:
    """Largest shortfall of a client's coverage below the target.

    Parameters
    ----------
    y_true, y_intervals, client_ids
        As in :func:`per_client_coverage`.
    alpha : float, default=None
        Target is ``1 - alpha``; ``None`` uses the overall coverage instead.

    Returns
    -------
    gap : float
        ``max_c(target - coverage_c)``, floored at 0: 0 means every client
        reaches the target.

    Examples
    --------
    >>> max_coverage_gap([1, 5, 1], [[0, 2]] * 3, ["a", "a", "b"], alpha=0.1)
    0.4
    """
    res = per_client_coverage(y_true, y_intervals, client_ids)
    if alpha is None:
        target = coverage_score(y_true, y_intervals)
    else:
        target = 1.0 - check_alpha(alpha)
    return float(max(np.max(target - res.coverage), 0.0))
