"""
======================================================
Choosing epsilon: the most privacy at a tolerable cost
======================================================

Differential privacy costs width: the smaller ``epsilon``, the noisier the
released threshold and the wider the intervals (the coverage guarantee
holds at every ``epsilon``). A grid search over ``epsilon`` needs a goal;
the one here is *the smallest ``epsilon`` whose mean interval width stays
within 10 % of the non-private one*.

1. Measure the reference: the mean width of the same estimator with the
   non-private calibrator (``"qq"``), by cross-validation on the same folds.
2. Search ``epsilon`` with the mean width as a scorer and
   :func:`~skfedcp.metrics.make_budget_refit` with
   ``budget = 1.1 * reference`` as the ``refit`` rule.

The six study sites of the RAND Health Insurance Experiment are the clients;
each releases one ``epsilon``-DP quantile of its scores (FedCP²-QQ,
``calibrator="dp-qq"``).
"""

# %%
# A frozen model and the calibration data
# ---------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GridSearchCV, KFold, cross_validate

from skfedcp import FedConformalRegressor
from skfedcp.datasets import load_randhie
from skfedcp.metrics import get_interval_scorer, make_budget_refit

X, y, site = load_randhie(return_X_y=True)
rng = np.random.default_rng(0)
part = rng.choice(3, size=len(y), p=[0.4, 0.4, 0.2])  # train / tune / test
train, tune, test = part == 0, part == 1, part == 2
model = FrozenEstimator(
    HistGradientBoostingRegressor(random_state=0).fit(X[train], y[train])
)
cv = KFold(n_splits=4, shuffle=True, random_state=0)
scoring = {
    "neg_mean_width": get_interval_scorer("neg_mean_width"),
    "coverage": get_interval_scorer("coverage"),
}

# %%
# 1. The non-private reference
# ----------------------------
reference = cross_validate(
    FedConformalRegressor(model, calibrator="qq"),
    X[tune],
    y[tune],
    cv=cv,
    scoring=scoring,
    params={"client_ids": site[tune]},
)
ref_width = -reference["test_neg_mean_width"].mean()
budget = 1.1 * ref_width
print(f"non-private mean width {ref_width:.3f}; budget (+10 %) {budget:.3f}")

# %%
# 2. The search over epsilon
# --------------------------
# The exponential mechanism needs public bounds on the scores: the target
# ``log(1 + spend)`` lies in [0, 11] for this study, so the absolute
# residuals lie in [0, 12]. The folds are the same as for the reference.
epsilons = [2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
search = GridSearchCV(
    FedConformalRegressor(
        model, calibrator="dp-qq", score_bounds=(0.0, 12.0), random_state=0
    ),
    {"epsilon": epsilons},
    scoring=scoring,
    refit=make_budget_refit(budget, param="epsilon"),
    cv=cv,
)
search.fit(X[tune], y[tune], client_ids=site[tune])
widths = -search.cv_results_["mean_test_neg_mean_width"]
coverages = search.cv_results_["mean_test_coverage"]
for eps, w, c in zip(epsilons, widths, coverages, strict=True):
    print(f"epsilon={eps:<6} mean width {w:.3f}  coverage {c:.3f}")
best = search.best_estimator_
print("chosen: epsilon =", best.epsilon, "| spent:", best.epsilon_spent_)

# %%
# The chosen estimator on held-out rows
# -------------------------------------
# ``best_estimator_`` was refitted (recalibrated) on all tuning rows.
intervals = best.predict_interval(X[test])
lower, upper = intervals.T
print(
    f"test coverage {np.mean((lower <= y[test]) & (y[test] <= upper)):.3f}, "
    f"mean width {np.mean(upper - lower):.3f}"
)

# %%
# The price of privacy and the choice
# -----------------------------------
# Every ``epsilon`` spent in a search is spent: tuning on the private data
# itself costs the sum of the candidates' budgets. Tune on public or
# simulated data of the same shape where that matters (see the user guide).
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogx(epsilons, widths, "o-", label="dp-qq mean width (CV)")
ax.axhline(ref_width, color="grey", label="non-private (qq)")
ax.axhline(budget, color="tab:red", ls="--", label="budget: +10 %")
ax.plot(
    [best.epsilon],
    [widths[search.best_index_]],
    "s",
    ms=12,
    mfc="none",
    color="k",
    label="chosen",
)
ax.set_xlabel("epsilon")
ax.set_ylabel("mean width")
ax.set_title("Smallest epsilon within 10 % of the non-private width")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
