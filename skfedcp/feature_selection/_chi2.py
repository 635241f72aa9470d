"""FedChi2Selector: federated chi-square feature selection (FED-chi2)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Literal, cast

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from .._typing import ClientIds, MatrixLike, SklearnRandomState
from ..exceptions import SingleClientWarning
from ..federated._fixed_point import fixed_point_decode, fixed_point_encode
from ..federated._masked_sum import _masked_sum_simulation
from ..federated._partition import ClientPartition
from ..federated._secure_aggregation import _circulant_graph
from ..utils._atomic import atomic_fit
from ..utils._sklearn_compat import Interval, StrOptions, _fit_context
from ..utils._warnings import warn_user
from ._protocol import chi2_server_decode, chi2_server_marginals
from ._ranges import (
    _check_user_frac_bits,
    _frac_bits,
    _marginals_bound,
    _marginals_plan,
)
from ._sketch import (
    _gaussian_projections,
    _projection_seed,
    required_projection_dim,
)
from ._tables import (
    _blocks,
    _class_counts,
    _client_tables,
    _dof,
    _exact_scores,
    _offsets,
    _project_block,
    _residual_stack,
)

__all__ = ["FedChi2Selector", "fed_chi2"]

# Client-by-feature entries of round two processed at once (bounds memory).
_ROUND2_ENTRIES = 2**21


class FedChi2Selector(SelectorMixin, BaseEstimator):
    """Select the k best features by a federated chi-square statistic.

    A drop-in for ``SelectKBest(chi2, k=k)`` when the rows are spread over
    clients that must not reveal their data: the server learns the class
    counts, the feature totals and one sketch of ``n_projections`` numbers
    per feature, all through (simulated) secure aggregation, and estimates
    each feature's chi-square statistic from its sketch (FED-chi2, Pang et
    al., 2023). Each client sends ``n_classes + n_features`` numbers in
    round one and ``n_projections * n_features`` in round two.

    Parameters
    ----------
    k : int or "all", default=10
        Number of top features to select; ``"all"`` keeps every feature.
        ``k`` larger than the number of features warns and keeps all.
    statistic : {"sklearn", "contingency"}, default="sklearn"
        ``"sklearn"``: per feature ``sum_c (O_cj - E_cj)**2 / E_cj`` with
        ``O_cj`` the class-wise sum of feature ``j`` and ``E_cj = N_c F_j /
        N``, exactly what ``sklearn.feature_selection.chi2`` computes
        (dof ``n_classes - 1``). ``"contingency"``: each feature is an
        integer-coded categorical variable and the statistic is Pearson's
        test of its ``m_j x n_classes`` table, dof ``(m_j - 1)(n_classes -
        1)`` (the paper's use). Its levels are the distinct values of the
        column (a public schema).
    n_projections : int or tuple of (float, float), default=50
        Sketch size ``l`` per feature (the paper's default 50), or a target
        ``(eps, delta)``: ``l`` is then the smallest size with
        ``P[|score / chi2 - 1| > eps] <= delta`` for the chosen
        ``estimator`` (:func:`required_projection_dim`).
    estimator : {"geometric", "mean_square"}, default="geometric"
        Decoder of the sketch. ``"geometric"``: the paper's unbiased
        geometric-mean estimator (needs ``l >= 2``), mean relative error
        about ``sqrt(pi / l)``. ``"mean_square"``: ``sum e**2 / (2 l)``, the
        exact maximum-likelihood estimator, relative error ``sqrt(2 / l)``:
        as accurate with about 2.5 times fewer projections.
    expected_split : {"class", "uniform"}, default="class"
        How the expected counts are shared among clients in round two.
        ``"class"``: each client subtracts its own class counts times the
        global feature rate; dropped clients then remove only their own
        residuals. ``"uniform"``: ``E / n`` per client (the paper's), which
        leaves ``(n_dropped / n) E`` uncancelled under dropout.
    method : {"sketch", "plain"}, default="sketch"
        ``"sketch"``: the FED-chi2 protocol. ``"plain"``: secure sum of the
        class-by-feature table itself, exact (the same scores as
        ``chi2``) but the server learns the whole table; a baseline and a
        testing oracle.
    secure_agg : {"harary", "complete", "none"}, default="harary"
        Simulation of the secure sums. ``"harary"``: pairwise masks along a
        Harary graph of degree ``2 ceil(log2 n)`` (Bell et al., 2020, the
        paper's choice); ``"complete"``: masks between every pair of clients
        (Bonawitz et al., 2017); ``"none"``: plain modular sum of the
        fixed-point messages. The masks cancel exactly, so all three give
        bit-identical results; ``"none"`` is fastest. The simulated masks
        are AES-128-CTR streams, as in a deployment.
    frac_bits : int, default=None
        Fixed-point fractional bits of the sketch (and the most allowed for
        the round-1 sums of non-integer X). None: the sketch's bits are
        chosen per feature from the public marginals so that overflow needs
        an 8-sigma event; round-1 sums of integer X are exact, those of
        other X get up to 32 bits per coordinate, fewer when the announced
        bounds need them (see Notes). A value that would let a sum wrap
        around the 64-bit ring is refused with a ValueError.
    dropout : float or array-like, default=None
        Simulated clients lost in round two: a fraction of the clients drawn
        at random, or the labels of the clients that drop. With
        ``method="plain"`` the dropped clients miss the single round. Must
        leave at least one client.
    random_state : int, RandomState instance or None, default=None
        Source of the clients' shared projection seed, the simulated masks
        and the dropout draw. None (default): fresh operating-system entropy,
        used during ``fit`` only; nothing in the fitted object or its pickle
        can regenerate the projection. An int gives reproducible results but
        is a *simulation convenience*: whoever knows it (it is stored as a
        parameter) regenerates every projection matrix and can solve the
        sketch for the class-by-feature table. NumPy's global state is
        never used.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        Estimated chi-square statistics (exact with ``method="plain"``);
        NaN for features with zero total or when ``y`` has one class.
    pvalues_ : ndarray of shape (n_features,)
        ``chdtrc(dof_, scores_)``: the p-value of the estimated statistic.
    dof_ : ndarray of shape (n_features,)
        Degrees of freedom of each statistic.
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    dropped_clients_ : ndarray
        Labels of the clients dropped in round two.
    class_counts_ : ndarray of shape (n_classes,)
        Class counts learned by the server in round one.
    feature_totals_ : ndarray of shape (n_features,)
        Feature totals learned in round one (``statistic="sklearn"`` only).
    level_counts_ : list of ndarray
        Level counts of each feature (``statistic="contingency"`` only).
    categories_ : list of ndarray
        Levels of each feature (``statistic="contingency"`` only).
    n_projections_ : int or None
        Sketch size used (None with ``method="plain"``).
    sketch_ : ndarray of shape (n_projections, n_features)
        The aggregated sketch the server decoded (``method="sketch"``).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    fed_chi2 : Scores and p-values in one call.
    sklearn.feature_selection.SelectKBest : The pooled-data selector.

    Notes
    -----
    *Accuracy.* Each score is ``s_j`` times an error factor whose law does
    not depend on the data: with ``l`` projections the geometric estimator
    is unbiased with mean relative error about ``sqrt(pi / l)`` (0.25 at
    ``l = 50``); ``(eps, delta)`` targets follow the tail bounds of Li
    (2008) (the paper's Theorem 2). Guarantees are per feature, not
    simultaneous over features. Quantization error is negligible.

    *Security.* With secure aggregation the server sees only the marginals
    (class counts and feature totals), the summed sketches and who dropped
    out (the paper's Theorem 1). The projection seed is shared by the
    clients only; a server colluding with one client learns ``P_j`` and,
    since ``n_projections >= n_classes`` typically, can solve ``e_j = P_j
    w_j`` for the class-wise sums of feature ``j``. This class runs every
    party in one process: the secure aggregation is a simulation of the
    protocol's arithmetic, not a cryptographic implementation.

    *Dishonest clients.* The server checks what it sees against public
    numbers: the decoded sketch is refused (naming the feature) when no set
    of honest clients can produce it (:func:`chi2_server_decode`), and a
    deployment checks each client's announced size and bounds with
    :func:`chi2_server_plan`. Inside those ranges one dishonest client can
    still move the scores a lot: see the threat model in the user guide.

    *Fixed point.* Both secure sums work in the ring ``Z/2**64``. The plan
    of each round is public: in round one every client announces a
    power-of-two bound on each coordinate of its message (class counts,
    feature totals); coordinate ``j`` gets ``min(32, floor(log2(2**62 /
    (n_clients * bound_j))))`` fractional bits (0 for integer X), so that
    the total cannot wrap around, and a client whose values exceed its
    bound is refused before encoding (the server checks the decoded sums
    against ``n_clients * bound``). If no scale can hold the totals, ``fit``
    raises a ValueError naming X. Round two uses :func:`chi2_frac_bits`.

    *Fitted state.* The fitted object holds what the server learns: the
    marginals (``class_counts_``, ``feature_totals_`` or ``level_counts_``),
    the summed sketch ``sketch_``, the scores and who dropped out; never the
    projection seed, the masks or a generator that could regenerate them.

    *Bandwidth.* Round two sends ``n_projections * n_features`` words per
    client against ``n_classes * n_features`` for ``method="plain"``: with
    ``n_projections > n_classes`` the gain is privacy, not bandwidth.

    References
    ----------
    .. [1] L. Pang, Y. Wang, L. Wang, T. Zheng, D. Song, "Secure Federated
       Correlation Test and Entropy Estimation", ICML 2023.
    .. [2] P. Li, "Estimators and tail bounds for dimension reduction in
       l_alpha using stable random projections", SODA 2008.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> X, y = load_digits(return_X_y=True)
    >>> clients = np.arange(len(y)) % 5
    >>> sel = FedChi2Selector(k=20, random_state=0).fit(X, y, client_ids=clients)
    >>> sel.transform(X).shape
    (1797, 20)
    >>> plain = FedChi2Selector(k=20, method="plain").fit(X, y, client_ids=clients)
    >>> from sklearn.feature_selection import SelectKBest, chi2
    >>> pooled = SelectKBest(chi2, k=20).fit(X, y)
    >>> bool(np.all(plain.get_support() == pooled.get_support()))
    True
    """

    _parameter_constraints = {
        "k": [StrOptions({"all"}), Interval(Integral, 0, None, closed="left")],
        "statistic": [StrOptions({"sklearn", "contingency"})],
        "n_projections": [Interval(Integral, 1, None, closed="left"), tuple],
        "estimator": [StrOptions({"geometric", "mean_square"})],
        "expected_split": [StrOptions({"class", "uniform"})],
        "method": [StrOptions({"sketch", "plain"})],
        "secure_agg": [StrOptions({"harary", "complete", "none"})],
        "frac_bits": [Interval(Integral, 0, 62, closed="both"), None],
        "dropout": [Interval(Real, 0, 1, closed="left"), "array-like", None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        k: int | Literal["all"] = 10,
        *,
        statistic: Literal["sklearn", "contingency"] = "sklearn",
        n_projections: int | tuple[float, float] = 50,
        estimator: Literal["geometric", "mean_square"] = "geometric",
        expected_split: Literal["class", "uniform"] = "class",
        method: Literal["sketch", "plain"] = "sketch",
        secure_agg: Literal["harary", "complete", "none"] = "harary",
        frac_bits: int | None = None,
        dropout: float | ArrayLike | None = None,
        random_state: SklearnRandomState = None,
    ) -> None:
        self.k = k
        self.statistic = statistic
        self.n_projections = n_projections
        self.estimator = estimator
        self.expected_split = expected_split
        self.method = method
        self.secure_agg = secure_agg
        self.frac_bits = frac_bits
        self.dropout = dropout
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(
        self, X: MatrixLike, y: ArrayLike, client_ids: ClientIds = None
    ) -> FedChi2Selector:
        """Run the federated protocol and store the scores.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Non-negative features (integer level codes with
            ``statistic="contingency"``).
        y : array-like of shape (n_samples,)
            Class labels.
        client_ids : array-like of shape (n_samples,), default=None
            Client holding each row; None means a single client.

        Returns
        -------
        self : FedChi2Selector
            Fitted selector.
        """
        X, y = cast(  # validate_data is untyped; scipy's sparse types are Any
            "tuple[NDArray[np.floating] | sp.spmatrix | sp.sparray, NDArray[Any]]",
            validate_data(
                self, X, y, accept_sparse=["csr", "csc"], dtype=[np.float64, np.float32]
            ),
        )
        try:
            check_non_negative(X, f"{type(self).__name__} (X)")
        except ValueError as exc:
            raise ValueError(
                f"{exc} The chi-square statistic needs counts or other "
                "non-negative features: scale with MinMaxScaler (or "
                "MaxAbsScaler on non-negative data) instead of StandardScaler "
                "before FedChi2Selector, or one-hot encode categories."
            ) from exc
        check_classification_targets(y)
        if self.k != "all" and self.k > X.shape[1]:
            warn_user(
                f"k={self.k} is greater than n_features={X.shape[1]}. "
                "All the features will be returned.",
                UserWarning,
            )
        if client_ids is None and self.method != "plain":
            warn_user(
                "FedChi2Selector.fit got no client_ids: all rows form one client, "
                "so the secure sums run over a single client and protect nothing. "
                "Pass client_ids (the client holding each row).",
                SingleClientWarning,
            )
        X = (
            sp.csr_matrix(X, dtype=np.float64)
            if sp.issparse(X)
            else X.astype(np.float64, copy=False)
        )
        ell = self._resolve_n_projections()
        part = ClientPartition(client_ids, X.shape[0])
        # A refit starts from scratch: atomic_fit runs this on a shadow without
        # the previous fit's attributes and installs the new ones at the end.
        # A1: the clients' shared projection seed (uniform on [0, 2**128); the
        # sum-of-shares exchange leaves it uniform and is not simulated) and
        # the simulation's own stream (masks, dropout). Both stay local to
        # this call: the fitted (server-side) object never holds them, and
        # with random_state=None nothing it holds can regenerate them.
        seed, rng = _projection_seed(self.random_state)

        self.classes_, y_codes = np.unique(y, return_inverse=True)
        n_classes = self.classes_.shape[0]
        if n_classes < 2:
            warn_user(
                "y has a single class: every chi-square score is NaN, as with "
                "sklearn.feature_selection.chi2.",
                UserWarning,
            )
        n_levels = None
        if self.statistic == "contingency":
            X, n_levels = self._encode_levels(X)
        integer_x = _is_integer_valued(X)

        n_clients = part.n_clients
        codes = part.client_codes()
        self.clients_ = part.clients
        self.n_clients_ = n_clients
        dropped = self._draw_dropout(rng, part.clients)
        self.dropped_clients_ = part.clients[dropped]
        survivors = np.setdiff1d(np.arange(n_clients), dropped)
        edges = (
            None
            if self.secure_agg == "none"
            else _circulant_graph(n_clients, graph=self.secure_agg, random_state=rng)
        )

        tables = _client_tables(X, y_codes, codes, n_clients, n_classes, n_levels)
        counts = _class_counts(y_codes, codes, n_clients, n_classes)
        round1 = np.concatenate([counts, tables.sum(axis=1)], axis=1)
        if self.method == "plain":
            # One secure sum of the marginals and the tables, over survivors.
            message = np.concatenate([round1, tables.reshape(n_clients, -1)], axis=1)
            total = self._round_one(message, survivors, integer_x, edges, rng)
            n_samples = int(part.sizes[survivors].sum())
            marginals = self._marginals(
                total[: round1.shape[1]], n_classes, n_levels, n_samples
            )
            table = total[round1.shape[1] :].reshape(tables.shape[1:])
            result = _exact_scores(marginals, table)
            self.n_projections_ = None
        else:
            everyone = np.arange(n_clients)
            total = self._round_one(round1, everyone, integer_x, edges, rng)
            n_samples = int(part.sizes.sum())
            marginals = self._marginals(total, n_classes, n_levels, n_samples)
            self.sketch_ = self._round_two(
                tables, counts, marginals, survivors, seed, ell, edges, rng
            )
            result = chi2_server_decode(
                self.sketch_, marginals, estimator=self.estimator, n_projections=ell
            )
            self.n_projections_ = ell
        del seed, rng  # nothing that regenerates the projection outlives fit
        self.scores_, self.pvalues_ = result
        self.dof_ = _dof(marginals)
        self.class_counts_ = marginals.class_counts
        if n_levels is None:
            self.feature_totals_ = marginals.row_totals
        else:
            offsets = _offsets(n_levels.shape[0], n_levels)
            self.level_counts_ = [
                marginals.row_totals[offsets[j] : offsets[j + 1]]
                for j in range(n_levels.shape[0])
            ]
        return self

    # -- fit helpers -------------------------------------------------------

    def _resolve_n_projections(self):
        ell = self.n_projections
        if isinstance(ell, tuple):
            if len(ell) != 2 or not all(
                isinstance(v, Real) and not isinstance(v, bool) for v in ell
            ):
                raise ValueError(
                    "n_projections must be an int or a tuple (eps, delta) of two "
                    f"floats in (0, 1); got {ell!r}."
                )
            try:
                ell = required_projection_dim(*ell, estimator=self.estimator)
            except ValueError as exc:
                raise ValueError(
                    f"n_projections={self.n_projections!r}: {exc}"
                ) from exc
        if self.method == "sketch" and self.estimator == "geometric" and ell < 2:
            raise ValueError(
                "n_projections must be >= 2 with estimator='geometric'; got "
                f"{ell}. Use estimator='mean_square' for a single projection."
            )
        return int(ell)

    def _encode_levels(self, X):
        dense = X.toarray() if sp.issparse(X) else np.asarray(X)
        if np.any(dense != np.floor(dense)):
            raise ValueError(
                "X must hold integer-coded categories with statistic='contingency'; "
                "got non-integer values."
            )
        self.categories_ = [np.unique(dense[:, j]) for j in range(dense.shape[1])]
        codes = np.empty(dense.shape, dtype=np.float64)
        for j, cats in enumerate(self.categories_):
            codes[:, j] = np.searchsorted(cats, dense[:, j])
        n_levels = np.array([c.shape[0] for c in self.categories_], dtype=np.intp)
        return codes, n_levels

    def _draw_dropout(self, rng, clients):
        n = clients.shape[0]
        if self.dropout is None:
            return np.array([], dtype=np.intp)
        if isinstance(self.dropout, Real) and not isinstance(self.dropout, bool):
            n_drop = int(np.rint(self.dropout * n))
            dropped = np.sort(rng.choice(n, size=n_drop, replace=False))
        else:
            labels = np.asarray(self.dropout).ravel()
            dropped = np.flatnonzero(np.isin(clients, labels))
            if dropped.size != np.unique(labels).size:
                raise ValueError(
                    "dropout must list client labels present in client_ids; got "
                    f"{self.dropout!r}."
                )
        if dropped.size >= n:
            raise ValueError(
                f"dropout={self.dropout!r} removes every client ({n}); at least one "
                "client must take part in round two."
            )
        return dropped.astype(np.intp)

    def _secure_total(self, enc, survivors, n_clients, edges, rng):
        """Secure sum of the survivors' rows ``enc`` (uint64), one per survivor."""
        if edges is None:  # plain modular sum: the same bits, no masks
            return np.sum(enc, axis=0, dtype=np.uint64)
        return _masked_sum_simulation(enc, survivors, edges, rng, n_clients=n_clients)

    def _round_one(self, messages, survivors, integer_x, edges, rng):
        """Round 1: fixed-point plan from public bounds, then the secure sum.

        Each client announces a power-of-two bound on the magnitude of each
        coordinate of its message (:func:`_marginals_bound`); the public plan
        (the ring Z/2**64, the fractional bits and the bounds) gives each
        coordinate the most fractional bits, up to 32 (0 for integer X,
        summed exactly), with which the total cannot wrap around
        (:func:`_marginals_plan`).
        """
        n = int(survivors.shape[0])
        sent = messages[survivors]
        # The maximum of the clients' power-of-two bounds is the bound of
        # their maximum (one pass instead of one bound per client).
        bound = _marginals_bound(sent)
        plan = _marginals_plan(bound, n, integer_x=integer_x, frac_bits=self.frac_bits)
        enc = plan.encode(sent, name="X")
        total = self._secure_total(enc, survivors, messages.shape[0], edges, rng)
        return plan.decode(total)

    @staticmethod
    def _marginals(total, n_classes, n_levels, n_samples):
        return chi2_server_marginals(
            total,
            n_classes=n_classes,
            n_levels=n_levels,
            n_features=None if n_levels is not None else total.shape[0] - n_classes,
            n_samples=n_samples,
        )

    def _round_two(self, tables, counts, marginals, survivors, seed, ell, edges, rng):
        """Simulate round two: encode, quantize, mask, sum, dequantize.

        All survivors are processed together, feature block by feature block;
        each client's numbers are those of :func:`chi2_client_encode`, bit for
        bit (one matrix-vector product per client and feature).
        """
        n_clients, n_classes, _ = tables.shape
        n_feat = (
            marginals.row_totals.shape[0]
            if marginals.n_levels is None
            else marginals.n_levels.shape[0]
        )
        if self.frac_bits is None:
            bits = _frac_bits(marginals)
        else:
            bits = _check_user_frac_bits(self.frac_bits, marginals)
        offsets = _offsets(n_feat, marginals.n_levels)
        n_surv = survivors.shape[0]
        budget = max(1, _ROUND2_ENTRIES // n_surv)
        total = np.zeros(n_feat * ell, dtype=np.uint64)
        s_tables = tables[survivors]
        s_counts = counts[survivors]
        for start, stop in _blocks(marginals, ell, max_entries=budget):
            rows = slice(offsets[start], offsets[stop])
            width = (offsets[start + 1] - offsets[start]) * n_classes
            proj = _gaussian_projections(seed, range(start, stop), ell, width)
            u = _residual_stack(
                s_tables[:, :, rows],
                s_counts,
                marginals,
                rows,
                self.expected_split,
                n_clients,
            )
            e = _project_block(proj, u.reshape(n_surv, stop - start, width))
            q = fixed_point_encode(e, bits[None, start:stop, None])
            total[start * ell : stop * ell] = self._secure_total(
                q.reshape(n_surv, -1), survivors, n_clients, edges, rng
            )
        z = fixed_point_decode(total.reshape(n_feat, ell), bits[:, None])
        return z.T.copy()

    # -- selector API ------------------------------------------------------

    def _get_support_mask(self):
        check_is_fitted(self)
        if self.k == "all":
            return np.ones(self.scores_.shape, dtype=bool)
        if self.k == 0:
            return np.zeros(self.scores_.shape, dtype=bool)
        scores = np.array(self.scores_, dtype=np.float64)
        scores[np.isnan(scores)] = np.finfo(scores.dtype).min
        mask = np.zeros(scores.shape, dtype=bool)
        mask[np.argsort(scores, kind="mergesort")[-self.k :]] = True
        return mask

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags


def _is_integer_valued(X, chunk=2**16):
    # Row chunks: np.floor of the whole of X would double the peak memory.
    values = X.data if sp.issparse(X) else X
    for start in range(0, values.shape[0], chunk):
        part = values[start : start + chunk]
        if not np.all(part == np.floor(part)):
            return False
    return True


def fed_chi2(
    X: MatrixLike, y: ArrayLike, client_ids: ClientIds = None, **options: Any
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Federated chi-square scores and p-values of every feature.

    Shorthand for ``FedChi2Selector(k="all", **options).fit(X, y,
    client_ids)``: the federated counterpart of
    ``sklearn.feature_selection.chi2``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Non-negative features.
    y : array-like of shape (n_samples,)
        Class labels.
    client_ids : array-like of shape (n_samples,), default=None
        Client holding each row; None means one client.
    **options
        Any parameter of :class:`FedChi2Selector` except ``k``.

    Returns
    -------
    scores : ndarray of shape (n_features,)
        Estimated chi-square statistics.
    pvalues : ndarray of shape (n_features,)
        Their p-values.

    Examples
    --------
    >>> X = np.array([[1, 1, 3], [0, 1, 5], [5, 4, 1], [6, 6, 2], [1, 4, 0], [0, 0, 0]])
    >>> y = np.array([1, 1, 0, 0, 2, 2])
    >>> scores, pvalues = fed_chi2(X, y, [0, 1, 0, 1, 0, 1], method="plain")
    >>> scores
    array([15.3,  6.5       ,  8.9])
    >>> scores, _ = fed_chi2(X, y, [0, 1, 0, 1, 0, 1], n_projections=(0.1, 0.05),
    ...                      estimator="mean_square", random_state=0)
    >>> bool(np.all(np.abs(scores / [15.3, 6.5, 8.9] - 1) < 0.2))
    True
    """
    if "k" in options:
        raise TypeError("fed_chi2 scores every feature: do not pass k.")
    selector = FedChi2Selector(k="all", **options).fit(X, y, client_ids=client_ids)
    return selector.scores_, selector.pvalues_
