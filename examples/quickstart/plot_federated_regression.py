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
results = {}
for name in ["central", "qq", "avg"]:
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=0.1, calibrator=name)
    reg.fit(X[cal], y[cal], client_ids=site[cal])
    intervals = reg.predict_interval(X[test])
    results[name] = intervals
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
# Per-site coverage of the QQ intervals
# -------------------------------------
res = per_client_coverage(y[test], results["qq"], site[test])
for client, cov, n in zip(res.clients, res.coverage, res.n_samples, strict=True):
    print(f"site {client}: coverage {cov:.3f} on {n} test rows")

# %%
# Plot (matplotlib is an optional extra)
# --------------------------------------
try:
    import matplotlib.pyplot as plt
except ImportError:  # pragma: no cover
    plt = None
if plt is not None:
    fig, ax = plt.subplots(figsize=(6, 3))
    order = np.argsort(model.predict(X[test]))[::40]
    for offset, (name, iv) in enumerate(results.items()):
        ax.vlines(
            np.arange(len(order)) + 0.25 * offset,
            iv[order, 0],
            iv[order, 1],
            label=name,
            color=f"C{offset}",
            alpha=0.7,
        )
    ax.plot(np.arange(len(order)), y[test][order], "k.", ms=3, label="truth")
    ax.set_xlabel("test rows (sorted by prediction)")
    ax.set_ylabel("log(1 + medical spend)")
    ax.legend(fontsize=8)
    fig.tight_layout()
