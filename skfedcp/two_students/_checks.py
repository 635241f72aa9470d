"""Input checks of TwoStudentsRegressor.fit (client models, rounds, seeds, alpha)."""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..base._levels import check_alpha_levels
from ..utils._random import check_seed_sequence
from ..utils._validation import check_alpha

__all__ = [
    "check_alpha_levels_or_float",
    "check_client_models",
    "check_rng",
    "check_round_setup",
    "check_trusted_models",
]


def check_trusted_models(trusted_models):
    """The trusted models as a list (empty for None); each must predict."""
    if trusted_models is None:
        return []
    if isinstance(trusted_models, Mapping) or not hasattr(trusted_models, "__iter__"):
        raise TypeError("trusted_models must be a list of fitted regressors.")
    trusted = list(trusted_models)
    for model in trusted:
        if not hasattr(model, "predict"):
            raise TypeError(
                "trusted_models must hold fitted regressors; got "
                f"{type(model).__name__}."
            )
    return trusted


def check_round_setup(
    filter_reference, multi_round, teacher, mean_template, client_models
):
    """Refuse settings that a one-shot or a multi-round fit cannot honour."""
    if filter_reference == "previous" and not multi_round:
        raise ValueError(
            "filter_reference='previous' uses the previous round's uncertainty "
            "student and needs n_rounds > 1; use 'loo' for one-shot fits."
        )
    if not multi_round:
        return
    if client_models is not None:
        raise ValueError(
            "client_models cannot be used with n_rounds > 1: clients retrain "
            "from the mean student in every round."
        )
    if "warm_start" not in mean_template.get_params():
        raise ValueError(
            "n_rounds > 1 needs a mean_student with a warm_start parameter "
            "(e.g. MLPRegressor or SGDRegressor): clients warm-start from it; "
            f"got {type(mean_template).__name__}."
        )
    if type(teacher) is not type(mean_template):
        raise ValueError(
            "with n_rounds > 1 the clients warm-start from the mean student, "
            "so estimator must be of the same class as mean_student (and the "
            f"same architecture); got {type(teacher).__name__} and "
            f"{type(mean_template).__name__}."
        )


def check_client_models(client_models, clients):
    """The supplied client models in the order of ``clients`` (None if none)."""
    if client_models is None:
        return None
    if not isinstance(client_models, Mapping):
        raise TypeError(
            "client_models must be a dict {client label: fitted regressor}; got "
            f"{type(client_models).__name__}."
        )
    expected = set(clients.tolist())
    keys = set(client_models)
    if keys != expected:
        missing = sorted(map(str, expected - keys))
        extra = sorted(map(str, keys - expected))
        raise ValueError(
            "client_models keys must match the labels in client_ids; missing "
            f"{missing}, unexpected {extra}."
        )
    models = [client_models[c] for c in clients.tolist()]
    for model in models:
        if not hasattr(model, "predict"):
            raise TypeError(
                "client_models values must be fitted regressors; got "
                f"{type(model).__name__}."
            )
    return models


def check_rng(random_state):
    """The fit's RandomState; never NumPy's global one.

    An int or a RandomState is used as scikit-learn would (so seeded fits are
    unchanged); anything else goes through a SeedSequence, ``None`` drawing
    fresh operating-system entropy instead of the global state.
    """
    if isinstance(random_state, np.random.RandomState):
        return random_state
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return np.random.RandomState(int(random_state))
    seed = check_seed_sequence(random_state, allow_secure=False)
    return np.random.RandomState(np.random.MT19937(seed))


def check_alpha_levels_or_float(alpha: Any) -> float | NDArray[np.float64]:
    """``alpha`` checked: a float in (0, 1), or an array of distinct levels."""
    levels = check_alpha_levels(alpha)
    return check_alpha(alpha) if levels is None else levels
