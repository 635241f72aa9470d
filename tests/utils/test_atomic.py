"""atomic_fit: an interrupted or concurrent fit never leaves a mixed state."""

import threading

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from skfedcp.feature_selection import FedChi2Selector
from skfedcp.utils._atomic import atomic_fit


class _Est(BaseEstimator):
    _private_fit_state = frozenset({"_kept"})

    def __init__(self, k=1):
        self.k = k

    @atomic_fit
    def fit(self, value, fail_after_first=False):
        self._scratch = value
        self._kept = value
        self.first_ = value
        if fail_after_first:
            raise KeyboardInterrupt
        self.second_ = value
        return self


def test_interrupted_refit_keeps_the_previous_state():
    est = _Est().fit(1)
    with pytest.raises(KeyboardInterrupt):
        est.fit(2, fail_after_first=True)
    assert (est.first_, est.second_) == (1, 1)


def test_refit_drops_stale_fitted_attributes_and_keeps_parameters():
    est = _Est(k=3).fit(1)
    est.extra_ = "stale"
    est.fit(2)
    assert not hasattr(est, "extra_")
    assert est.k == 3 and est.first_ == est.second_ == 2


def test_private_scratch_is_dropped_and_private_fit_state_kept():
    est = _Est().fit(1)
    est.fit(2)
    assert not hasattr(est, "_scratch")  # scratch of the fit, never installed
    assert est._kept == 2  # named in _private_fit_state: part of the fit
    with pytest.raises(KeyboardInterrupt):
        est.fit(3, fail_after_first=True)
    assert est._kept == 2


def test_first_fit_interrupted_leaves_the_estimator_unfitted():
    est = _Est()
    with pytest.raises(KeyboardInterrupt):
        est.fit(1, fail_after_first=True)
    assert not hasattr(est, "first_")


def _chi2_data(seed, n_features):
    rng = np.random.default_rng(seed)
    X = rng.poisson(3.0, size=(300, n_features)).astype(float)
    y = rng.integers(0, 3 + seed % 2, 300)
    return X, y, np.arange(300) % 5


def test_chi2_selector_interrupted_refit_keeps_the_previous_state(monkeypatch):
    X, y, ids = _chi2_data(0, 6)
    sel = FedChi2Selector(k=2, random_state=0).fit(X, y, client_ids=ids)
    before = {k: v for k, v in vars(sel).items() if k.endswith("_")}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(FedChi2Selector, "_round_two", interrupted)
    X2, y2, ids2 = _chi2_data(1, 9)
    with pytest.raises(KeyboardInterrupt):
        sel.fit(X2, y2, client_ids=ids2)
    after = {k: v for k, v in vars(sel).items() if k.endswith("_")}
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert after[key] is value, key


def test_chi2_selector_fitted_from_threads_holds_one_complete_fit():
    # Four threads fit one selector on data of different widths and classes;
    # whichever fit lands last, every attribute must come from that one fit.
    datasets = [_chi2_data(seed, 4 + seed) for seed in range(4)]
    references = [
        FedChi2Selector(k=2, random_state=0).fit(X, y, client_ids=ids)
        for X, y, ids in datasets
    ]
    for trial in range(5):
        sel = FedChi2Selector(k=2, random_state=0)
        barrier = threading.Barrier(len(datasets))

        def work(sel, barrier, X, y, ids):
            barrier.wait()
            sel.fit(X, y, client_ids=ids)

        threads = [
            threading.Thread(target=work, args=(sel, barrier, *d)) for d in datasets
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        match = [r for r in references if r.n_features_in_ == sel.n_features_in_]
        assert len(match) == 1, trial
        ref = match[0]
        np.testing.assert_array_equal(sel.scores_, ref.scores_)
        np.testing.assert_array_equal(sel.classes_, ref.classes_)
        np.testing.assert_array_equal(sel.feature_totals_, ref.feature_totals_)
        assert sel.sketch_.shape == ref.sketch_.shape
