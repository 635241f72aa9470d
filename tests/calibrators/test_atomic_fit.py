"""A calibrator's fit is atomic: interrupted, it leaves the previous fit whole."""

import pickle
import warnings

import numpy as np
import pytest

from skfedcp.calibrators import CALIBRATORS, BaseCalibrator
from skfedcp.calibrators._ldp._score_protocol import _Transcript

BOUNDS = (0.0, 1.0)
PARAMS = {
    "dp-central": {"epsilon": 5.0, "score_bounds": BOUNDS},
    "dp-qq": {"epsilon": 5.0, "score_bounds": BOUNDS, "n_bins": 50},
    "ldp-l": {"epsilon": 4.0},
    "ldp-l*": {"epsilon": 4.0},
    "ldp-s": {"epsilon": 4.0, "score_bounds": BOUNDS},
    "ldp-s*": {"epsilon": 4.0, "score_bounds": BOUNDS},
}


def _calibrator(name):
    return CALIBRATORS[name](**PARAMS.get(name, {}))


def _fit(cal, seed, **kwargs):
    """Fit ``cal`` on data drawn from ``seed`` (a score matrix for LDP-L)."""
    rng = np.random.default_rng(seed)
    m, n = 4, 500
    ids = np.repeat(np.arange(m), n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if cal.requires_score_matrix:
            proba = rng.dirichlet(np.ones(3), size=m * n)
            labels = rng.integers(0, 3, m * n)
            return cal.fit(
                1.0 - proba, ids, labels=labels, alpha=0.2, random_state=seed, **kwargs
            )
        scores = rng.uniform(size=m * n)
        return cal.fit(scores, ids, alpha=0.2, random_state=seed, **kwargs)


def _fitted_state(cal):
    private = type(cal)._private_fit_state
    return {k: v for k, v in vars(cal).items() if k.endswith("_") or k in private}


def _break_late_step(monkeypatch, cal, exception):
    """Make the last step of a fit raise, after fitted attributes were set."""
    if cal.interactive:  # LDP-S: inside _set_fitted, after the first attributes
        original = _Transcript.reports_per_client

        def late(self, *args, **kwargs):
            original(self, *args, **kwargs)
            raise exception

        monkeypatch.setattr(_Transcript, "reports_per_client", late)
        return
    original = type(cal)._after_fit

    def late(self, *args, **kwargs):
        original(self, *args, **kwargs)
        assert hasattr(self, "threshold_")  # the new fit was under way
        raise exception

    monkeypatch.setattr(type(cal), "_after_fit", late)


@pytest.mark.parametrize("exception", [RuntimeError("late"), KeyboardInterrupt()])
@pytest.mark.parametrize("name", sorted(CALIBRATORS))
def test_interrupted_refit_keeps_the_previous_fit(name, exception, monkeypatch):
    cal = _fit(_calibrator(name), seed=0)
    before = dict(vars(cal))
    blob = pickle.dumps(cal)
    _break_late_step(monkeypatch, cal, exception)
    with pytest.raises(type(exception)):
        _fit(cal, seed=1)
    # Nothing of the interrupted fit is visible: the same attributes, the
    # same objects, the same pickle.
    assert vars(cal).keys() == before.keys()
    assert all(vars(cal)[k] is v for k, v in before.items())
    assert pickle.dumps(cal) == blob
    monkeypatch.undo()
    # The next fit completes and replaces the whole state.
    again = _fit(cal, seed=1)
    assert again is cal
    assert _fitted_state(cal).keys() == _fitted_state(_fit(_calibrator(name), 1)).keys()


@pytest.mark.parametrize("exception", [RuntimeError("late"), KeyboardInterrupt()])
@pytest.mark.parametrize("name", sorted(CALIBRATORS))
def test_interrupted_first_fit_leaves_no_fitted_state(name, exception, monkeypatch):
    cal = _calibrator(name)
    params = dict(vars(cal))
    _break_late_step(monkeypatch, cal, exception)
    with pytest.raises(type(exception)):
        _fit(cal, seed=0)
    assert vars(cal) == params
    assert not hasattr(cal, "_fitted_alpha")


@pytest.mark.parametrize("name", sorted(CALIBRATORS))
def test_pickle_holds_parameters_and_the_fit_only(name):
    """What a fitted calibrator keeps (and pickles): its parameters, the
    fitted attributes and the declared private fit state, no scratch."""
    cal = _fit(_calibrator(name), seed=0)
    params = set(cal.get_params(deep=False))
    private = type(cal)._private_fit_state
    assert private == frozenset({"_fitted_alpha"})
    for key in vars(cal):
        assert key in params or key.endswith("_") or key in private, key
    again = pickle.loads(pickle.dumps(cal))
    assert again.threshold_ == cal.threshold_
    # _fitted_alpha travels with the fit: coverage_bounds() still answers.
    np.testing.assert_equal(
        tuple(again.coverage_bounds()), tuple(cal.coverage_bounds())
    )


def test_interrupted_fit_from_messages_keeps_the_previous_fit(monkeypatch):
    cal = _calibrator("central")
    sizes = [3, 2]
    first = [{"n": 3, "scores": np.array([1.0, 2.0, 3.0])}, {"n": 2, "scores": [4, 5]}]
    cal.fit_from_messages(first, alpha=0.5, n_per_client=sizes)
    before = dict(vars(cal))
    _break_late_step(monkeypatch, cal, KeyboardInterrupt())
    second = [{"n": 3, "scores": np.array([7.0, 8.0, 9.0])}, {"n": 2, "scores": [1, 1]}]
    with pytest.raises(KeyboardInterrupt):
        cal.fit_from_messages(second, alpha=0.1, n_per_client=sizes)
    assert vars(cal).keys() == before.keys()
    assert all(vars(cal)[k] is v for k, v in before.items())
    assert cal._fitted_alpha == 0.5


def test_refit_starts_from_scratch():
    """A completed refit leaves no attribute of the previous fit behind."""

    class Stale(BaseCalibrator):
        _message_fields = {"n": "size"}

        def _client_message(self, scores, alpha, n_per_client, random_state):
            return {"n": scores.shape[0]}

        def _aggregate(self, received, *, alpha, random_state):
            return 1.0

        def _after_fit(self, received, *, alpha, details=None):
            if received.sizes.sum() > 3:
                self.only_large_ = True

    cal = Stale().fit_from_messages([{"n": 4}], alpha=0.1, n_per_client=[4])
    assert cal.only_large_
    cal.fit_from_messages([{"n": 2}], alpha=0.1, n_per_client=[2])
    assert not hasattr(cal, "only_large_")
    assert cal.client_step([1.0, 2.0], alpha=0.1, n_per_client=[2]) == {"n": 2}


@pytest.mark.parametrize("exception", [RuntimeError("late"), KeyboardInterrupt()])
def test_grouped_interrupted_refit_keeps_the_previous_fit(exception, monkeypatch):
    from skfedcp.calibrators import GroupedCalibrator

    rng = np.random.default_rng(0)
    scores, ids = rng.uniform(size=600), np.repeat(np.arange(4), 150)
    groups = rng.integers(0, 3, 600)
    cal = GroupedCalibrator("qq").fit(scores, ids, group_ids=groups, alpha=0.2)
    before = dict(vars(cal))
    blob = pickle.dumps(cal)
    original = GroupedCalibrator._set_fitted

    def late(self, *args, **kwargs):
        original(self, *args, **kwargs)
        assert hasattr(self, "threshold_")  # the new fit was under way
        raise exception

    monkeypatch.setattr(GroupedCalibrator, "_set_fitted", late)
    with pytest.raises(type(exception)):
        cal.fit(scores[::-1], ids, group_ids=groups[::-1], alpha=0.1)
    assert vars(cal).keys() == before.keys()
    assert all(vars(cal)[k] is v for k, v in before.items())
    assert pickle.dumps(cal) == blob
    # A first fit that fails leaves no fitted state at all.
    fresh = GroupedCalibrator("qq")
    with pytest.raises(type(exception)):
        fresh.fit(scores, ids, group_ids=groups, alpha=0.2)
    assert not any(k.endswith("_") for k in vars(fresh))
