"""Diagnostic plots following scikit-learn's Display convention.

Each display is built with ``from_estimator`` or ``from_predictions`` and
keeps its matplotlib objects as attributes (``ax_``, ``figure_`` and the
artists). matplotlib is imported only when a display draws: install it with
``pip install "skfedcp[plot]"``.
"""

from ._client_coverage import ClientCoverageDisplay
from ._interval import IntervalDisplay
from ._privacy_tradeoff import PrivacyTradeoffDisplay

__all__ = ["ClientCoverageDisplay", "IntervalDisplay", "PrivacyTradeoffDisplay"]
