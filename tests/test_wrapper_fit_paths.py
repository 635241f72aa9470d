"""The wrapper's own model training: client_ids into pipelines, warnings, tags."""

import warnings

import numpy as np
import pytest
import sklearn
from scipy.sparse import csr_matrix
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_estimator_sparse_tag

from skfedcp import FedConformalRegressor
from skfedcp.base._wrapper import client_ids_params
from skfedcp.classification import PrivateConformalClassifier
from skfedcp.exceptions import PrivacyLeakWarning, SingleClientWarning
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.metrics import get_set_scorer


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((600, 12))
    y = (X[:, 0] + X[:, 3] + 0.3 * rng.random(600) > 1.1).astype(int)
    client_ids = np.repeat(np.arange(6), 100)
    return X, y, client_ids


def _selector_pipeline():
    return make_pipeline(MinMaxScaler(), FedChi2Selector(k=4), LogisticRegression())


def test_client_ids_reach_a_selector_inside_the_wrapped_pipeline(data):
    X, y, c = data
    clf = PrivateConformalClassifier(
        _selector_pipeline(), epsilon=4.0, calibration_size=0.5, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingleClientWarning)
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        clf.fit(X, y, client_ids=c)
    selector = clf.estimator_.named_steps["fedchi2selector"]
    np.testing.assert_array_equal(selector.clients_, np.arange(6))
    assert selector.n_clients_ == 6
    assert clf.predict_set(X[:5]).shape == (5, 2)


def test_client_ids_reach_a_selector_in_a_nested_pipeline(data):
    X, y, c = data
    inner = Pipeline([("scale", MinMaxScaler()), ("select", FedChi2Selector(k=4))])
    outer = Pipeline([("prep", inner), ("model", LogisticRegression())])
    assert list(client_ids_params(outer, c)) == ["prep__select__client_ids"]
    clf = PrivateConformalClassifier(outer, calibrator="central", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingleClientWarning)
        clf.fit(X, y, client_ids=c)
    selector = clf.estimator_.named_steps["prep"].named_steps["select"]
    np.testing.assert_array_equal(selector.clients_, np.arange(6))


def test_client_ids_with_metadata_routing(data):
    X, y, c = data
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(
            MinMaxScaler(),
            FedChi2Selector(k=4).set_fit_request(client_ids=True),
            LogisticRegression(),
        )
        clf = PrivateConformalClassifier(pipe, calibrator="central", random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", SingleClientWarning)
            clf.fit(X, y, client_ids=c)
    selector = clf.estimator_.named_steps["fedchi2selector"]
    np.testing.assert_array_equal(selector.clients_, np.arange(6))


def test_pipeline_without_client_ids_steps_gets_none(data):
    pipe = make_pipeline(MinMaxScaler(), LogisticRegression())
    assert client_ids_params(pipe, data[2]) == {}
    assert list(client_ids_params(FedChi2Selector(), data[2])) == ["client_ids"]


def test_privacy_leak_warning_once_per_search(data):
    X, y, c = data
    search = GridSearchCV(
        PrivateConformalClassifier(random_state=0),
        {"alpha": [0.1, 0.2], "epsilon": [1.0, 4.0]},
        scoring=get_set_scorer("neg_mean_set_size"),
        cv=3,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        search.fit(X, y, client_ids=c)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1  # 13 fits (12 + refit), one warning
    assert leaks[0].filename == __file__


def test_privacy_leak_warning_every_fit_when_asked_always(data):
    X, y, c = data
    search = GridSearchCV(
        PrivateConformalClassifier(random_state=0), {"alpha": [0.1, 0.2]}, cv=2
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y, client_ids=c)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 5  # 2 candidates x 2 folds + the refit


def test_privacy_leak_warning_every_plain_fit(data):
    X, y, c = data
    clf = PrivateConformalClassifier(random_state=0)
    for _ in range(2):
        with pytest.warns(PrivacyLeakWarning):
            clf.fit(X, y, client_ids=c)


def test_normalized_score_does_not_claim_sparse_input():
    reg = FedConformalRegressor(conformity_score="normalized", random_state=0)
    assert get_tags(reg).input_tags.sparse is False
    check_estimator_sparse_tag(type(reg).__name__, reg)
    rng = np.random.default_rng(0)
    X = csr_matrix(rng.random((200, 3)))
    with pytest.raises(TypeError, match="[Ss]parse"):
        reg.fit(X, rng.random(200))
    # the absolute score keeps forwarding the point model's tag
    assert get_tags(FedConformalRegressor()).input_tags.sparse is True
