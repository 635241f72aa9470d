"""Which clients (or groups) cover below 1 - alpha beyond chance (exact tests)."""

from __future__ import annotations

from numbers import Real
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..federated._partition import ClientPartition
from ..utils._validation import check_alpha

__all__ = ["ClientCoverageTest", "client_coverage_test"]

_CORRECTIONS = ("holm", "bh", "none")


class ClientCoverageTest(NamedTuple):
    """Per-client coverage with one-sided exact binomial tests.

    ``below`` marks the clients whose coverage is below ``target`` beyond
    chance after the multiplicity correction. Prints as a short table of the
    flagged clients; :meth:`to_frame` gives every client.
    """

    clients: NDArray
    n_samples: NDArray[np.intp]
    coverage: NDArray[np.float64]
    pvalues: NDArray[np.float64]
    adjusted_pvalues: NDArray[np.float64]
    below: NDArray[np.bool_]
    target: float
    significance: float
    correction: str

    def to_frame(self) -> pd.DataFrame:
        """Every client as a DataFrame indexed by client.

        Returns
        -------
        frame : pandas.DataFrame
            Columns ``n_samples``, ``coverage``, ``pvalue``,
            ``adjusted_pvalue`` and ``below``; index ``client``.
        """
        return pd.DataFrame(
            {
                "n_samples": self.n_samples,
                "coverage": self.coverage,
                "pvalue": self.pvalues,
                "adjusted_pvalue": self.adjusted_pvalues,
                "below": self.below,
            },
            index=pd.Index(self.clients, name="client"),
        )

    def __repr__(self) -> str:
        n_below = int(self.below.sum())
        head = (
            f"ClientCoverageTest: {n_below} of {self.clients.shape[0]} clients "
            f"below {self.target:g} (exact binomial, {self.correction} at "
            f"{self.significance:g})"
        )
        if n_below == 0:
            return head
        rows = np.flatnonzero(self.below)
        rows = rows[np.argsort(self.adjusted_pvalues[rows], kind="stable")]
        lines = [head, "client  n_samples  coverage  adjusted p"]
        for i in rows:
            lines.append(
                f"{str(self.clients[i]):>6}  {int(self.n_samples[i]):9d}  "
                f"{self.coverage[i]:8.4f}  {self.adjusted_pvalues[i]:10.3g}"
            )
        return "\n".join(lines)


def client_coverage_test(
    covered: ArrayLike,
    client_ids: ArrayLike,
    *,
    alpha: float,
    tolerance: float = 0.0,
    significance: float = 0.05,
    correction: Literal["holm", "bh", "none"] = "holm",
) -> ClientCoverageTest:
    """Flag the clients whose held-out coverage is below ``1 - alpha`` beyond chance.

    For client ``j`` with ``n_j`` held-out rows of which ``c_j`` are covered,
    the one-sided exact binomial test of ``H0: coverage_j >= t`` (``t = 1 -
    alpha - tolerance``) has p-value ``P(Binomial(n_j, t) <= c_j)``. The
    p-values are then corrected for testing every client: Holm's step-down
    method (``"holm"``, family-wise error at most ``significance`` under any
    dependence), Benjamini-Hochberg (``"bh"``, false discovery rate) or none.

    What is tested is the coverage of the *fitted* intervals or sets on the
    client's population, i.e. conditional on the calibration rows. A conformal
    guarantee is an average over calibration draws too: even for a client
    exchangeable with the others, the fitted threshold's coverage differs from
    its mean by about ``sqrt(alpha (1 - alpha) / N)`` for ``N`` calibration
    rows, which a very large test set can detect. ``tolerance`` (e.g. two such
    standard errors) tests ``coverage >= 1 - alpha - tolerance`` instead.

    Parameters
    ----------
    covered : array-like of shape (n_samples,)
        Whether each held-out row is covered (booleans or 0/1), e.g.
        ``(y >= lo) & (y <= hi)`` for intervals or ``sets[i, label_i]`` for
        sets.
    client_ids : array-like of shape (n_samples,)
        Client (or group) of each row.
    alpha : float
        Target miscoverage in (0, 1).
    tolerance : float, default=0.0
        Slack below ``1 - alpha`` that is not flagged, in ``[0, 1 - alpha)``.
    significance : float, default=0.05
        Level of the corrected test, in (0, 1).
    correction : {"holm", "bh", "none"}, default="holm"
        Multiplicity correction.

    Returns
    -------
    result : ClientCoverageTest
        Sorted client labels, their sizes, coverage, raw and adjusted
        p-values and the flagged clients; prints as a short table.

    See Also
    --------
    skfedcp.plotting.ClientCoverageDisplay : draws each client's coverage and
        circles the clients this test flags.

    Examples
    --------
    >>> import numpy as np
    >>> covered = np.r_[np.ones(90), np.zeros(10), np.ones(60), np.zeros(40)]
    >>> clients = np.repeat(["a", "b"], 100)
    >>> client_coverage_test(covered, clients, alpha=0.1)
    ClientCoverageTest: 1 of 2 clients below 0.9 (exact binomial, holm at 0.05)
    client  n_samples  coverage  adjusted p
         b        100    0.6000    5.89e-15
    """
    alpha = check_alpha(alpha)
    hits = np.asarray(covered)
    if hits.ndim != 1:
        raise ValueError(f"covered must be 1-D; got shape {hits.shape}.")
    if hits.dtype.kind not in "biuf" or not np.isin(hits, (0, 1)).all():
        raise ValueError("covered must hold booleans or 0/1 (one per held-out row).")
    _check_fraction("tolerance", tolerance, 1.0 - alpha)
    check_test_params(significance, correction)
    part = ClientPartition(client_ids, hits.shape[0])
    c = np.bincount(
        part.client_codes(), weights=hits.astype(np.float64), minlength=part.n_clients
    )
    return coverage_test_from_counts(
        part.clients,
        part.sizes,
        c,
        target=1.0 - alpha - float(tolerance),
        significance=significance,
        correction=correction,
    )


def _check_fraction(name: str, value: object, high: float) -> None:
    """``value`` must be a number in ``[0, high)`` (``(0, high)`` unless tolerance)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number; got {value!r}.")
    number = float(value)
    low_ok = number >= 0.0 if name == "tolerance" else number > 0.0
    if not (low_ok and number < high):
        raise ValueError(
            f"{name} must be in {'[0' if name == 'tolerance' else '(0'}, "
            f"{high:g}); got {value!r}."
        )


def check_test_params(significance: object, correction: object) -> None:
    """Check the level and the multiplicity correction of the per-client test."""
    _check_fraction("significance", significance, 1.0)
    if correction not in _CORRECTIONS:
        raise ValueError(
            f"correction must be one of {', '.join(map(repr, _CORRECTIONS))}; "
            f"got {correction!r}."
        )


def coverage_test_from_counts(
    clients: ArrayLike,
    n_samples: ArrayLike,
    n_covered: ArrayLike,
    *,
    target: float,
    significance: float,
    correction: str,
) -> ClientCoverageTest:
    """The tests of :func:`client_coverage_test` from per-client counts.

    ``n_covered`` (rounded to integers) of the ``n_samples`` held-out rows of
    each client are covered; the parameters are checked by the caller.
    """
    n = np.asarray(n_samples, dtype=np.intp)
    c = np.rint(np.asarray(n_covered, dtype=np.float64)).astype(np.intp)
    pvalues = stats.binom.cdf(c, n, target)
    adjusted = _adjust(pvalues, correction)
    return ClientCoverageTest(
        clients=np.asarray(clients),
        n_samples=n,
        coverage=c / n,
        pvalues=pvalues,
        adjusted_pvalues=adjusted,
        below=adjusted <= significance,
        target=target,
        significance=float(significance),
        correction=correction,
    )


def _adjust(pvalues: NDArray[np.float64], correction: str) -> NDArray[np.float64]:
    """Holm or Benjamini-Hochberg adjusted p-values (monotone, capped at 1)."""
    m = pvalues.shape[0]
    if correction == "none" or m == 0:
        return pvalues.copy()
    order = np.argsort(pvalues, kind="stable")
    ranked = pvalues[order]
    if correction == "holm":
        steps = np.maximum.accumulate((m - np.arange(m)) * ranked)
    else:  # "bh"
        steps = np.minimum.accumulate(m / np.arange(m, 0, -1) * ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(steps, 1.0)
    return out
