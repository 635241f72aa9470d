"""
=======================================================
Choosing alpha: the best coverage within a width budget
=======================================================

A grid search over ``alpha`` needs a goal. Scoring each candidate by its own
interval score (:func:`~skfedcp.metrics.interval_score` at that candidate's
``alpha``) rewards miscoverage: it picks the largest ``alpha`` on offer.
A goal that means something states the trade-off: *the smallest ``alpha``
(the highest guaranteed coverage ``1 - alpha``) whose intervals are, on
average, no wider than a budget*. :func:`~skfedcp.metrics.make_budget_refit`
turns that goal into a ``refit=`` rule for
:class:`~sklearn.model_selection.GridSearchCV`.

The data are the hourly bike rentals of 2011 (ISLP ``Bikeshare``); each
month is a client of the federation (``client_ids``), the target is
``log(1 + riders)``.
"""

# %%
# Data and the conformal estimator
# --------------------------------
# The wrapper holds an unfitted model: each fit trains it on part of every
# client's rows and calibrates on the rest. A quarter of the rows is kept
# aside to check the chosen candidate.
import warnings

import matplotlib.pyplot as plt
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import GridSearchCV, KFold, train_test_split

from skfedcp import FedConformalRegressor
from skfedcp.datasets import load_bikeshare
from skfedcp.metrics import (
    coverage_score,
    get_interval_scorer,
    make_budget_refit,
    mean_width_score,
)

X, y, month = load_bikeshare(return_X_y=True)
X_dev, X_test, y_dev, y_test, month_dev, month_test = train_test_split(
    X, y, month, test_size=0.25, random_state=0
)
reg = FedConformalRegressor(
    HistGradientBoostingRegressor(max_iter=100, random_state=0),
    calibrator="qq",
    random_state=0,
)
alphas = [0.02, 0.05, 0.1, 0.2, 0.3]
cv = KFold(n_splits=3, shuffle=True, random_state=0)

# %%
# What not to do: the interval score at each candidate's own alpha
# ----------------------------------------------------------------
# The interval score (width plus ``2 / alpha`` times the miss) is a proper
# score *at one alpha*. Across alphas the penalty shrinks as alpha grows, so
# the largest alpha wins. The scorer warns about it.
naive = GridSearchCV(
    reg,
    {"alpha": alphas},
    scoring=get_interval_scorer("neg_interval_score"),
    cv=cv,
    refit=False,
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    naive.fit(X_dev, y_dev, client_ids=month_dev)
print("interval score picks alpha =", naive.best_params_["alpha"])
print("warning:", str(caught[0].message)[:100], "...")

# %%
# The goal: the smallest alpha whose mean width is at most 1.2
# ------------------------------------------------------------
# On the log scale a width of 1.2 means the upper bound is at most
# ``exp(1.2) = 3.3`` times the lower one. The search reports the mean width
# and the coverage of every candidate; ``make_budget_refit`` reads the mean
# width over the folds and refits the chosen candidate on all rows.
budget = 1.2
search = GridSearchCV(
    reg,
    {"alpha": alphas},
    scoring={
        "neg_mean_width": get_interval_scorer("neg_mean_width"),
        "coverage": get_interval_scorer("coverage"),
    },
    refit=make_budget_refit(budget, param="alpha"),
    cv=cv,
)
search.fit(X_dev, y_dev, client_ids=month_dev)
widths = -search.cv_results_["mean_test_neg_mean_width"]
coverages = search.cv_results_["mean_test_coverage"]
for a, w, c in zip(alphas, widths, coverages, strict=True):
    print(f"alpha={a:<5} mean width {w:.3f}  coverage {c:.3f}")
best = search.best_estimator_
print("chosen: alpha =", best.alpha)

# %%
# Intervals from the fitted search
# --------------------------------
# ``best_estimator_`` is the chosen wrapper refitted on every development
# row: it gives intervals directly.
intervals = best.predict_interval(X_test)
print(
    f"held-out coverage {coverage_score(y_test, intervals):.3f} "
    f"(target {1 - best.alpha:.2f}, guaranteed on average over calibration "
    "draws), "
    f"mean width {mean_width_score(intervals):.3f} (budget {budget})"
)

# %%
# The trade-off and the choice
# ----------------------------
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(alphas, widths, "o-", label="mean width (CV)")
ax.axhline(budget, color="tab:red", ls="--", label="width budget")
ax.plot(
    [best.alpha],
    [widths[search.best_index_]],
    "s",
    ms=12,
    mfc="none",
    color="k",
    label="chosen",
)
ax.set_xlabel("alpha (miscoverage)")
ax.set_ylabel("mean width, log(1 + riders)")
ax2 = ax.twinx()
ax2.plot(alphas, coverages, "^:", color="tab:green", label="coverage (CV)")
ax2.set_ylabel("coverage")
fig.legend(loc="upper right", bbox_to_anchor=(0.88, 0.88), fontsize=8)
ax.set_title("Smallest alpha whose intervals meet the budget")
fig.tight_layout()
plt.show()
