"""
================================================
Federated conformal intervals across study sites
================================================

A model is fitted once; six study sites of the RAND Health Insurance
Experiment each hold calibration rows they cannot share. We calibrate
prediction intervals across the sites with the one-shot quantile-of-quantiles
strategy (each site sends one number) and compare it with pooled (central)
split conformal prediction and with averaging of local quantiles.
"""

# %%
# Data with natural clients
# -------------------------
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp import FedConformalRegressor
from skfedcp.datasets import load_randhie
from skfedcp.metrics import coverage_score, mean_width_score, per_client_coverage

X, y, site = load_randhie(return_X_y=True)
rng = np.random.default_rng(0)
part = rng.choice(3, size=len(y), p=[0.5, 0.25, 0.25])  # train / calibrate / test
train, cal, test = part == 0, part == 1, part == 2
print(f"{len(y)} rows, {len(np.unique(site))} sites")

# %%
# Fit the model once, then freeze it
# -----------------------------------
model = HistGradientBoostingRegressor(random_state=0).fit(X[train], y[train])

# %%
# Calibrate across sites with three strategies
# --------------------------------------------
results, fitted = {}, {}
for name in ["central", "qq", "avg"]:
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=0.1, calibrator=name)
    reg.fit(X[cal], y[cal], client_ids=site[cal])
    intervals = reg.predict_interval(X[test])
    results[name], fitted[name] = intervals, reg
    print(
        f"{name:8s} coverage={coverage_score(y[test], intervals):.3f} "
        f"width={mean_width_score(intervals):.3f} threshold={reg.threshold_:.3f}"
    )

# %%
# What did the server see? One order statistic per site for QQ, and the
# selected ranks come with their exact coverage guarantee.
reg = FedConformalRegressor(FrozenEstimator(model), alpha=0.1, calibrator="qq")
reg.fit(X[cal], y[cal], client_ids=site[cal])
print(reg.messages_)
print(reg.calibrator_.calibration_info_)

# %%
# Per-site coverage
# -----------------
# The guarantee is marginal: on average over sites and calibration draws.
# :class:`~skfedcp.plotting.ClientCoverageDisplay` shows each site's test
# coverage (points, sites ordered by test size) against the target
# ``1 - alpha`` (dashed) and the coverage the strategy guarantees at these
# site sizes (dotted; ``avg`` has none). The shaded bar of a site is the
# central 95 % range of ``Binomial(n, 0.9) / n`` at its ``n`` test rows:
# where one site's coverage would fall 95 % of the time if it were exactly
# 0.9. A point outside its bar (drawn red) is evidence that the site is
# over- or under-covered; small sites get wide bars.
import matplotlib.pyplot as plt

from skfedcp.plotting import ClientCoverageDisplay, IntervalDisplay

res = per_client_coverage(y[test], results["qq"], site[test])
for client, cov, n in zip(res.clients, res.coverage, res.n_samples, strict=True):
    print(f"site {client}: QQ coverage {cov:.3f} on {n} test rows")

fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=True, layout="constrained")
for ax, (name, reg) in zip(axes, fitted.items(), strict=True):
    ClientCoverageDisplay.from_estimator(
        reg, X[test], y[test], client_ids=site[test], ax=ax, name=name
    )
    ax.set_title(name)
    if ax is not axes[0]:
        ax.set_ylabel("")

# %%
# Intervals row by row
# --------------------
# :class:`~skfedcp.plotting.IntervalDisplay` draws 150 test rows at evenly
# spaced ranks of the prediction: each bar is an interval ``f(x) ± q``
# coloured by site, the line is ``f(x)``, black dots are truths inside their
# interval and red crosses those outside. The spend is zero for many people,
# and those rows sit below the intervals of the larger predictions: the
# absolute-residual score gives every row the same width, however easy it is.
disp = IntervalDisplay.from_estimator(
    fitted["qq"], X[test], y[test], client_ids=site[test], max_rows=150
)
disp.ax_.set_ylabel("log(1 + medical spend)")
disp.figure_.set_size_inches(8, 4)
disp.figure_.tight_layout()
