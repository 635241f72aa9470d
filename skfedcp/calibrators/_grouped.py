"""Group-conditional (Mondrian) calibration: one federated round per group."""

from __future__ import annotations

import math
import warnings
from numbers import Integral
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from .._typing import ClientIds, SecureRandomStateLike
from ..exceptions import InfiniteThresholdWarning, SmallCalibrationSetWarning
from ..utils._atomic import atomic_fit
from ..utils._random import check_seed_sequence
from ..utils._sklearn_compat import Interval, ParamNamesCacheMixin
from ..utils._validation import check_alpha, check_client_ids
from ..utils._warnings import warn_user
from ._averaging import AveragingCalibrator
from ._base import BaseCalibrator, _warn_single_client
from ._central import CentralCalibrator
from ._dp._qq import PrivateQuantileOfQuantilesCalibrator
from ._qq._calibrator import QuantileOfQuantilesCalibrator

__all__ = [
    "GROUPED_CALIBRATORS",
    "GroupCoverageBounds",
    "GroupedCalibrator",
    "check_grouped_calibrator",
]

#: The strategies that can run once per group, alias -> class.
GROUPED_CALIBRATORS: dict[str, type[BaseCalibrator]] = {
    "avg": AveragingCalibrator,
    "central": CentralCalibrator,
    "dp-qq": PrivateQuantileOfQuantilesCalibrator,
    "qq": QuantileOfQuantilesCalibrator,
}

#: The label of the merged group's cells in ``messages_["group"]``.
_MERGED = "<merged>"


class GroupCoverageBounds(NamedTuple):
    """Coverage implied by theory, one entry per group (aligned with ``groups_``).

    ``lower[g]`` bounds ``P(Y in C(X) | G = g)`` for any score law;
    ``upper[g]`` holds for continuous scores; ``nan`` where theory gives
    nothing (``"avg"``). A group whose threshold is ``+inf`` for want of
    rows has ``(1, 1)``.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]


def check_grouped_calibrator(
    calibrator: str | BaseCalibrator, *, owner: str | None = None
) -> BaseCalibrator:
    """A fresh calibrator that can run per group; a clear error otherwise.

    Examples
    --------
    >>> check_grouped_calibrator("qq")
    QuantileOfQuantilesCalibrator()
    >>> check_grouped_calibrator("dp-central")
    Traceback (most recent call last):
    ...
    ValueError: group-conditional calibration (group_by) supports the strategies ...
    """
    if isinstance(calibrator, str):
        cls = GROUPED_CALIBRATORS.get(calibrator)
        base = None if cls is None else cls()
    elif isinstance(calibrator, BaseCalibrator):
        base = clone(calibrator)
    else:
        raise TypeError(
            "calibrator must be a string alias or an instance of "
            f"skfedcp.calibrators.BaseCalibrator; got {type(calibrator).__name__}."
        )
    if base is None or type(base) not in GROUPED_CALIBRATORS.values():
        name = calibrator if isinstance(calibrator, str) else type(base).__name__
        listed = ", ".join(repr(n) for n in GROUPED_CALIBRATORS)
        where = f" in {owner}" if owner else ""
        raise ValueError(
            f"group-conditional calibration (group_by){where} supports the "
            f"strategies {listed} (or instances of their classes); got {name!r}. "
            "Its per-group round is not implemented for that strategy yet."
        )
    return base


class GroupedCalibrator(ParamNamesCacheMixin, BaseEstimator):
    """Group-conditional (Mondrian) calibration through a federated strategy.

    Every calibration row has a group (a class, a covariate's bin, ...). Each
    client sends one message per non-empty (client, group) cell, and the
    server runs ``calibrator`` once per group on that group's cells, with the
    plan of that group's cell sizes: for group ``g`` a cell is a client of
    ``g``'s round. The result is one threshold per group; a test row uses
    its group's.

    Parameters
    ----------
    calibrator : {"qq", "central", "avg", "dp-qq"} or BaseCalibrator, \
            default="qq"
        The strategy run per group (an instance is cloned, never mutated).
        Other strategies are refused with an error naming them.
    min_group_size : int, default=None
        Groups with fewer calibration rows (all clients together) are
        calibrated together, as one merged group (each client sends one
        message for its rows of all those groups); they share its threshold,
        and so do groups unseen in calibration. ``None``: every group on its
        own; a group too small for a finite threshold gets ``+inf`` (trivial
        sets), with an :class:`~skfedcp.exceptions.InfiniteThresholdWarning`
        naming it. The merged group's guarantee is weaker, see Notes.

    Attributes
    ----------
    groups_ : ndarray of shape (n_groups,)
        Sorted group labels: those seen in calibration and the
        ``known_groups`` given to :meth:`fit`.
    threshold_ : ndarray of shape (n_groups,)
        The threshold of each group; ``+inf`` for a group without enough
        rows.
    fallback_threshold_ : float
        The threshold of groups unseen in calibration: the merged group's
        when ``min_group_size`` merged some, else ``+inf``.
    n_per_group_ : ndarray of shape (n_groups,)
        Calibration rows of each group.
    merged_groups_ : ndarray
        The groups calibrated together (``min_group_size``); empty if none.
    infinite_groups_ : ndarray
        The groups whose threshold is ``+inf``.
    calibrators_ : list
        The fitted strategy of each group (aligned with ``groups_``; the
        merged groups share one; ``None`` for a group without rows).
    messages_ : dict of ndarray
        What the server received, one entry per (client, group) cell:
        ``client``, ``group`` (the merged cells hold ``"<merged>"``) and the
        strategy's fields (``n`` is the cell's size).
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    epsilon_spent_ : float
        Privacy loss of a record's score (``"dp-qq"``): the cells are
        disjoint, so it is the largest loss of one group's release
        (parallel composition, see Notes); ``inf`` for non-private
        strategies.
    coverage_bounds_ : GroupCoverageBounds
        :meth:`coverage_bounds` of the fit (computed on first read: a fit
        pays no group's exact coverage until it is asked for).

    Notes
    -----
    **Guarantee.** If, within each group, the calibration scores of all
    clients and the test score are exchangeable (their law may differ from
    group to group, and the clients' mix of groups may differ), then for
    every group ``g``, ``P(score <= threshold_[g] | G = g) >= M_g >= 1 -
    alpha``, ``M_g`` the strategy's exact coverage at the cell sizes of
    ``g`` (``coverage_bounds_.lower[g]``). Corollary: when the clients
    differ only in their mix of groups, every client's coverage is ``>= 1 -
    alpha``. Proofs: user guide, :ref:`heterogeneity`.

    **Merged groups.** The groups merged by ``min_group_size`` share one
    threshold calibrated on all their rows: coverage ``>= 1 - alpha`` holds
    for a test row drawn from those groups together (conditional on ``G``
    being one of them, when the set of merged groups is fixed before the
    data is seen), not for each of them; an unseen group gets it only if its
    rows are exchangeable with the merged ones. To keep the exact guarantee,
    merge rare groups yourself in the grouping, chosen on other data.

    **Privacy.** Beyond what the strategy reveals per client, the server
    learns each client's group histogram (the cell sizes ``n``: e.g. its
    label counts with class groups). With ``"dp-qq"`` each cell's release
    is ``epsilon``-DP in that cell's scores (replace-one neighbours, sizes
    public); a record lies in exactly one cell, so the releases of one
    client compose in parallel: ``epsilon_spent_ = epsilon`` for a change
    of one record's score. A change of a record's group is not hidden: the
    cell sizes are sent in the clear; were they hidden, it would touch two
    cells (``2 epsilon`` for the thresholds).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> scores = np.concatenate([rng.uniform(size=300), 3 * rng.uniform(size=300)])
    >>> groups = np.repeat(["easy", "hard"], 300)
    >>> clients = np.tile(np.arange(6), 100)
    >>> cal = GroupedCalibrator("qq").fit(scores, clients, group_ids=groups,
    ...                                   alpha=0.1)
    >>> cal.groups_.tolist(), np.round(cal.threshold_, 2).tolist()
    (['easy', 'hard'], [0.91, 2.68])
    """

    # The level of the fit, kept for coverage_bounds (a fitted state).
    _private_fit_state = frozenset({"_fitted_alpha"})

    _parameter_constraints = {
        "calibrator": [str, BaseCalibrator],
        "min_group_size": [None, Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        calibrator: str | BaseCalibrator = "qq",
        *,
        min_group_size: int | None = None,
    ) -> None:
        self.calibrator = calibrator
        self.min_group_size = min_group_size

    @atomic_fit
    def fit(
        self,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        group_ids: ArrayLike,
        alpha: float,
        known_groups: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
    ) -> GroupedCalibrator:
        """Run the strategy once per group on that group's (client, group) cells.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Conformity scores of all calibration rows.
        client_ids : array-like of shape (n_samples,), default=None
            Client of each row; ``None`` means one client.
        group_ids : array-like of shape (n_samples,)
            Group of each row (any hashable labels, no missing values).
        alpha : float
            Miscoverage level in (0, 1), for every group.
        known_groups : array-like, default=None
            Groups that get a threshold even without calibration rows (then
            ``+inf``, or the merged group's with ``min_group_size``), e.g.
            every class of a classifier.
        random_state : int, SeedSequence, "secure" or None, default=None
            Root of the strategies' randomness: group ``u`` (in the order of
            ``groups_``, the merged group last) receives the ``u``-th child
            spawned from it.
        n_jobs : int, default=None
            Passed to the strategy's ``fit``.

        Returns
        -------
        self : object
        """
        self._validate_params()
        base = check_grouped_calibrator(self.calibrator)
        alpha = check_alpha(alpha)
        scores = np.asarray(scores)
        if scores.ndim != 1:
            raise ValueError(f"scores must be 1-D; got shape {scores.shape}.")
        n = scores.shape[0]
        if n == 0:
            raise ValueError("no calibration rows: scores is empty.")
        if client_ids is None and base._federated:
            _warn_single_client(base)
        clients = check_client_ids(client_ids, n)
        labels = _check_group_ids(group_ids, n)
        seen, codes = np.unique(labels, return_inverse=True)
        counts = np.bincount(codes, minlength=seen.shape[0])
        groups = seen
        if known_groups is not None:
            groups = np.unique(np.concatenate([seen, np.asarray(known_groups)]))
        small = np.zeros(seen.shape[0], dtype=bool)
        if self.min_group_size is not None:
            small = counts < self.min_group_size
        # The calibration units: each large group alone, then the merged one.
        order = np.argsort(codes, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(counts)))
        units = [order[bounds[g] : bounds[g + 1]] for g in np.flatnonzero(~small)]
        if small.any():
            units.append(
                np.sort(
                    np.concatenate(
                        [
                            order[bounds[g] : bounds[g + 1]]
                            for g in np.flatnonzero(small)
                        ]
                    )
                )
            )
        seeds = _unit_seeds(random_state, len(units))
        fitted = []
        with warnings.catch_warnings():
            # One warning naming the groups, below, instead of one per group.
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            for rows, seed in zip(units, seeds, strict=True):
                cal = clone(base).fit(
                    scores[rows],
                    clients[rows],
                    alpha=alpha,
                    random_state=seed,
                    n_jobs=n_jobs,
                )
                fitted.append(cal)
        n_per_group = np.zeros(groups.shape[0], dtype=np.int64)
        n_per_group[pd.Index(groups).get_indexer(seen)] = counts
        self._set_fitted(
            fitted,
            groups=groups,
            unit_groups=seen[~small],
            merged_groups=seen[small],
            n_per_group=n_per_group,
            clients=clients,
            alpha=alpha,
        )
        return self

    def _set_fitted(
        self, fitted, *, groups, unit_groups, merged_groups, n_per_group, clients, alpha
    ):
        """Set the fitted attributes from the units' fitted calibrators.

        ``fitted`` holds one fitted strategy per group of ``unit_groups`` (in
        that order), then the merged one if ``merged_groups`` is not empty;
        ``groups`` is every known group, ``n_per_group`` its rows. Shared by
        :meth:`fit` and the Flower server, which fits the same units from the
        nodes' cell messages.
        """
        merged = fitted[-1] if len(merged_groups) else None
        per_group: list[Any] = [merged] * groups.shape[0]
        for g, cal in zip(
            pd.Index(groups).get_indexer(unit_groups), fitted, strict=False
        ):
            per_group[g] = cal
        self.groups_ = groups
        self.calibrators_ = per_group
        self.threshold_ = np.array(
            [np.inf if c is None else c.threshold_ for c in per_group],
            dtype=np.float64,
        )
        self.fallback_threshold_ = np.inf if merged is None else merged.threshold_
        self.n_per_group_ = n_per_group
        self.merged_groups_ = merged_groups
        self.infinite_groups_ = groups[np.isposinf(self.threshold_)]
        unit_labels = [*unit_groups, *([_MERGED] if merged is not None else [])]
        self.messages_ = _cell_messages(fitted, unit_labels)
        self.clients_ = np.unique(clients)
        self.n_clients_ = int(self.clients_.shape[0])
        self.epsilon_spent_ = max(
            float(getattr(c, "epsilon_spent_", math.inf)) for c in fitted
        )
        self._fitted_alpha = alpha
        # Computed on first read: a fit (a grid search's folds) reads no
        # group's bounds, which cost a group's exact coverage (QQ) or its
        # upper bound against dishonest clients (n_byzantine).
        self.coverage_bounds_ = _BoundsNotRead()
        if self.infinite_groups_.size:
            self._warn_infinite(alpha)

    def _warn_infinite(self, alpha):
        index = pd.Index(self.groups_).get_indexer(self.infinite_groups_)
        listed = ", ".join(
            f"{g!r} ({n} rows)"
            for g, n in zip(
                self.infinite_groups_[:10].tolist(),
                self.n_per_group_[index][:10].tolist(),
                strict=True,
            )
        )
        more = f" and {index.size - 10} more" if index.size > 10 else ""
        hint = (
            "raise min_group_size"
            if self.min_group_size is not None
            else "set min_group_size to calibrate small groups together"
        )
        warn_user(
            f"GroupedCalibrator: the threshold of group(s) {listed}{more} is +inf "
            f"at alpha={alpha} (too few calibration rows for a finite threshold, "
            "or a private release in the top bin): their prediction sets are "
            f"trivial. Use more data, a larger alpha, or {hint}.",
            InfiniteThresholdWarning,
        )

    def group_index(self, group_ids: ArrayLike) -> NDArray[np.intp]:
        """Position of each label in ``groups_``; ``-1`` for an unseen group.

        Unseen groups (not in ``groups_``) warn with a
        :class:`~skfedcp.exceptions.SmallCalibrationSetWarning`: they get
        ``fallback_threshold_``.
        """
        check_is_fitted(self, "groups_")
        return lookup_groups(self.groups_, group_ids, self.fallback_threshold_)

    def predict_threshold(self, group_ids: ArrayLike) -> NDArray[np.float64]:
        """The threshold of each row's group (``fallback_threshold_`` if unseen)."""
        index = self.group_index(group_ids)
        return np.append(self.threshold_, self.fallback_threshold_)[index]

    @property
    def coverage_bounds_(self) -> GroupCoverageBounds:
        """:meth:`coverage_bounds` of the fit, computed on first read."""
        try:
            bounds = self.__dict__["coverage_bounds_"]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute 'coverage_bounds_'"
            ) from None
        if isinstance(bounds, _BoundsNotRead):
            bounds = self.__dict__["coverage_bounds_"] = self.coverage_bounds()
        return bounds

    @coverage_bounds_.setter
    def coverage_bounds_(self, bounds):
        self.__dict__["coverage_bounds_"] = bounds

    def coverage_bounds(self) -> GroupCoverageBounds:
        """Per-group ``(lower, upper)`` coverage of the fitted plans.

        Each group's is its strategy's ``coverage_bounds()`` at the group's
        cell sizes (``M_g``); ``(1, 1)`` for a group without rows (threshold
        ``+inf``). Merged groups report the merged group's, which holds for
        them together only.
        """
        check_is_fitted(self, "calibrators_")
        lower = np.ones(len(self.calibrators_))
        upper = np.ones(len(self.calibrators_))
        for g, cal in enumerate(self.calibrators_):
            if cal is not None:
                lower[g], upper[g] = cal.coverage_bounds()
        return GroupCoverageBounds(lower, upper)


class _BoundsNotRead:
    """Marker of a fit's ``coverage_bounds_`` not read yet (picklable)."""


def lookup_groups(
    groups: NDArray[Any], group_ids: ArrayLike, fallback: Any
) -> NDArray[np.intp]:
    """Position of each of ``group_ids`` in ``groups``; ``-1`` (warned) if absent."""
    labels = np.asarray(group_ids)
    index = np.asarray(pd.Index(groups).get_indexer(labels.ravel()), dtype=np.intp)
    unseen = index < 0
    if unseen.any():
        missing = pd.unique(labels.ravel()[unseen]).tolist()
        what = (
            "+inf (trivial sets)"
            if np.all(np.isposinf(fallback))
            else ("the merged small groups' threshold (min_group_size)")
        )
        warn_user(
            f"{int(unseen.sum())} row(s) belong to group(s) not seen in "
            f"calibration ({', '.join(repr(g) for g in missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}); they get {what}.",
            SmallCalibrationSetWarning,
        )
    return index


def _check_group_ids(group_ids, n):
    """The group labels as a 1-D array of length ``n``, with no missing value."""
    if group_ids is None:
        raise ValueError("group_ids is required: the group of each row.")
    labels = np.asarray(group_ids)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"group_ids must be 1-D of shape ({n},), one group per row; got "
            f"shape {labels.shape}."
        )
    if labels.dtype.kind in "fcOmM" and pd.isna(labels).any():
        raise ValueError(
            "group_ids holds missing values (NaN or None); give every row a group."
        )
    return labels


def _unit_seeds(random_state, n_units):
    """One independent seed per calibration unit (repeated for None / "secure")."""
    if random_state is None or isinstance(random_state, str):
        return [random_state] * n_units
    return check_seed_sequence(random_state, allow_secure=False).spawn(n_units)


def _cell_messages(fitted, unit_labels):
    """The units' ``messages_`` concatenated, with the group of each cell."""
    per_unit = [cal.messages_ for cal in fitted]
    group = np.empty(sum(len(m["client"]) for m in per_unit), dtype=object)
    start = 0
    for label, messages in zip(unit_labels, per_unit, strict=True):
        stop = start + len(messages["client"])
        group[start:stop] = [label] * (stop - start)
        start = stop
    out: dict[str, NDArray[Any]] = {}
    for key in per_unit[0]:
        values = [np.asarray(m[key]) for m in per_unit]
        if all(v.ndim == 1 for v in values) and len({v.dtype for v in values}) == 1:
            out[key] = np.concatenate(values)
        else:  # ragged (e.g. raw score arrays): one object per cell
            cells = [row for v in values for row in v]
            out[key] = np.empty(len(cells), dtype=object)
            for i, cell in enumerate(cells):
                out[key][i] = cell
        if key == "client":
            out["group"] = group
    return out
