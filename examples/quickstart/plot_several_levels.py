"""
=========================================
Several confidence levels from one fit
=========================================

Intervals at 80%, 90% and 95% usually take three fits, and with a private
calibrator three privacy budgets. Passing a sequence as ``alpha`` calibrates
all the levels in one fit: one model, one split, one round in which each
client sends one message per level. ``predict_interval`` then returns an
array of shape ``(n_samples, 2, n_levels)`` whose intervals are nested: a
smaller ``alpha`` never gives a narrower interval.
"""

# %%
# Data with natural clients
# -------------------------
# Bikeshare's twelve months act as twelve clients. Each keeps 40% of its
# rows to train, 40% to calibrate and 20% to test.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp import FedConformalRegressor
from skfedcp.datasets import load_bikeshare
from skfedcp.metrics import coverage_score, mean_width_score

X, y, month = load_bikeshare(return_X_y=True)
rng = np.random.default_rng(0)
part = np.empty(len(y), dtype=int)
for m in np.unique(month):
    rows = rng.permutation(np.flatnonzero(month == m))
    part[rows] = np.minimum(np.arange(len(rows)) * 5 // len(rows), 4) // 2
train, cal, test = part == 0, part == 1, part == 2
model = HistGradientBoostingRegressor(random_state=0).fit(X[train], y[train])

# %%
# One fit, three levels
# ---------------------
levels = [0.2, 0.1, 0.05]
reg = FedConformalRegressor(FrozenEstimator(model), alpha=levels, calibrator="central")
reg.fit(X[cal], y[cal], client_ids=month[cal])
intervals = reg.predict_interval(X[test])
print("shape:", intervals.shape)
for j, alpha in enumerate(levels):
    cov = coverage_score(y[test], intervals[:, :, j])
    width = mean_width_score(intervals[:, :, j])
    print(f"alpha={alpha:<5} coverage {cov:.3f} (target {1 - alpha:.2f}), ", end="")
    print(f"width {width:.2f}")

# %%
# The same thresholds as three separate fits
# ------------------------------------------
# For a non-private calibrator each level runs the calibrator a separate fit
# would run, on the same scores, so the thresholds agree.
for j, alpha in enumerate(levels):
    one = FedConformalRegressor(
        FrozenEstimator(model), alpha=alpha, calibrator="central"
    )
    one.fit(X[cal], y[cal], client_ids=month[cal])
    print(f"alpha={alpha}: {reg.threshold_[j]:.4f} (one fit) vs {one.threshold_:.4f}")

# %%
# Nested by construction
# ----------------------
# Going from the largest ``alpha`` to the smallest, each threshold is raised
# to the largest of its own and those of every larger ``alpha`` (a running
# maximum) and each interval to the hull of the wider levels' intervals.
# Raising a threshold only adds coverage, so every level keeps its guarantee.
lower, upper = intervals[:, 0, :], intervals[:, 1, :]
print(
    "nested on every row:",
    bool(np.all(np.diff(lower) <= 0) and np.all(np.diff(upper) >= 0)),
)

order = np.argsort(X[test][:, 0])[:60]
fig, ax = plt.subplots(figsize=(7, 3.5))
for j, alpha in reversed(list(enumerate(levels))):
    ax.fill_between(
        np.arange(len(order)),
        lower[order, j],
        upper[order, j],
        step="mid",
        alpha=0.35,
        label=f"{1 - alpha:.0%}",
    )
ax.plot(np.arange(len(order)), y[test][order], "k.", ms=4, label="observed")
ax.set_xlabel("test row")
ax.set_ylabel("log(1 + bikers)")
ax.legend(title="level", loc="upper left", ncol=4)
fig.tight_layout()

# %%
# A private calibrator: one budget for all levels
# -----------------------------------------------
# ``epsilon`` stays the budget of the whole fit: each of the three releases
# gets ``epsilon / 3`` and, by sequential composition, ``epsilon_spent_`` is
# their sum.
private = FedConformalRegressor(
    FrozenEstimator(model),
    alpha=levels,
    calibrator="dp-central",
    epsilon=3.0,
    score_bounds=(0.0, 4.0),
    random_state=0,
).fit(X[cal], y[cal], client_ids=month[cal])
print(
    "epsilon per level:",
    private.epsilon_spent_per_level_,
    "total:",
    private.epsilon_spent_,
)
