"""LAC and APS classification scores: values, sets, bounds, randomization."""

import numpy as np
import pytest

from skfedcp.scores import (
    CLASSIFICATION_SCORES,
    APSScore,
    LACScore,
    resolve_classification_score,
)

PROBA = np.array([[0.7, 0.2, 0.1], [0.25, 0.5, 0.25], [1 / 3, 1 / 3, 1 / 3]])


@pytest.fixture
def random_proba(seed):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(6, 0.5), size=200), rng.integers(0, 6, size=200)


ALL_SCORES = [LACScore(), APSScore(), APSScore(randomized=True)]


class TestValues:
    def test_lac(self):
        np.testing.assert_allclose(
            LACScore().conformity_score([0, 1, 2], PROBA), [0.3, 0.5, 2 / 3]
        )

    def test_aps_ranks_with_ties_by_class_index(self):
        scores = APSScore().label_scores(PROBA)
        np.testing.assert_allclose(scores[0], [0.7, 0.9, 1.0])
        # Ties (0.25, 0.25) are ranked by class index.
        np.testing.assert_allclose(scores[1], [0.75, 0.5, 1.0])
        np.testing.assert_allclose(scores[2], [1 / 3, 2 / 3, 1.0])

    def test_aps_randomized_lies_between_before_and_inclusive(self, random_proba):
        proba, _ = random_proba
        det = APSScore().label_scores(proba)
        rnd = APSScore(randomized=True).label_scores(proba, random_state=0)
        before = det - proba
        assert (rnd >= before - 1e-12).all() and (rnd <= det + 1e-12).all()
        # One U per row, shared by all its labels.
        u = (rnd - before) / np.where(proba > 0, proba, np.nan)
        assert np.nanmax(np.nanstd(u, axis=1)) < 1e-9

    def test_aps_randomized_is_reproducible(self, random_proba):
        proba, y = random_proba
        score = APSScore(randomized=True)
        a = score.conformity_score(y, proba, random_state=3)
        np.testing.assert_array_equal(
            a, score.conformity_score(y, proba, random_state=3)
        )
        assert not np.array_equal(a, score.conformity_score(y, proba, random_state=4))

    @pytest.mark.parametrize("score", ALL_SCORES, ids=repr)
    def test_bounded_in_unit_interval(self, score, random_proba):
        proba, _ = random_proba
        # Probabilities that sum slightly above one must not leave [0, 1].
        proba = proba * (1 + 1e-12)
        values = score.label_scores(proba, random_state=0)
        assert score.bounds == (0.0, 1.0)
        assert values.min() >= 0.0 and values.max() <= 1.0


class TestSets:
    @pytest.mark.parametrize("score", ALL_SCORES, ids=repr)
    def test_set_is_labels_with_score_below_threshold(self, score, random_proba):
        proba, y = random_proba
        for threshold in (0.0, 0.3, 0.9, 1.0):
            sets = score.predict_set(proba, threshold, random_state=1)
            assert sets.shape == proba.shape and sets.dtype == bool
            true_scores = score.conformity_score(y, proba, random_state=1)
            np.testing.assert_array_equal(
                sets[np.arange(len(y)), y], true_scores <= threshold
            )

    @pytest.mark.parametrize("score", ALL_SCORES, ids=repr)
    def test_infinite_threshold_gives_every_label(self, score, random_proba):
        proba, _ = random_proba
        assert score.predict_set(proba, np.inf, random_state=0).all()

    def test_aps_sets_are_nested_by_rank(self, random_proba):
        proba, _ = random_proba
        sets = APSScore().predict_set(proba, 0.8)
        order = np.argsort(-proba, axis=1, kind="stable")
        ranked = np.take_along_axis(sets, order, axis=1)
        # Included labels are a prefix of the ranking.
        assert (np.diff(ranked.astype(int), axis=1) <= 0).all()


class TestErrors:
    def test_bad_proba(self):
        with pytest.raises(ValueError, match="proba must have shape"):
            LACScore().label_scores([0.5, 0.5])
        with pytest.raises(ValueError, match="proba must be finite"):
            APSScore().label_scores([[np.nan, 1.0]])

    def test_bad_labels(self):
        with pytest.raises(ValueError, match="y_encoded must lie in"):
            LACScore().conformity_score([3], [[0.5, 0.5]])
        with pytest.raises(TypeError, match="integer class indices"):
            LACScore().conformity_score([0.5], [[0.5, 0.5]])
        with pytest.raises(ValueError, match="one class index per row"):
            LACScore().conformity_score([0, 1], [[0.5, 0.5]])

    def test_registry(self):
        assert set(CLASSIFICATION_SCORES) == {"lac", "aps"}
        assert isinstance(resolve_classification_score("lac"), LACScore)
        aps = APSScore(randomized=True)
        resolved = resolve_classification_score(aps)
        assert resolved is not aps and resolved.randomized
        with pytest.raises(ValueError, match="conformity_score must be one of"):
            resolve_classification_score("raps")
