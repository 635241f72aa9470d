"""
=====================================================================
Federated CQR on Romano et al.'s synthetic data (Humbert et al. 2023)
=====================================================================

A reproduction of Figure 3 of *One-Shot Federated Conformal Prediction*
(Humbert, Le Bars, Bellet and Arlot, ICML 2023), section 5.1. The data are
those of conformalized quantile regression (Romano et al., 2019):
:math:`X \\sim U[1, 5]` and :math:`Y = \\mathrm{Pois}(\\sin^2 X + 0.1) +
0.03 X \\varepsilon_1 + 25 \\cdot 1\\{U < 0.01\\} \\varepsilon_2`, whose
spread changes with :math:`X` and which carries about 1% of large outliers.

A quantile regression forest is trained on 1,000 points and frozen; 1,000
calibration points are held by :math:`m = 50` clients of :math:`n = 20`; the
symmetric CQR score is calibrated in three ways at :math:`\\alpha = 0.1`:

* ``"central"``: pooled split conformal prediction (clients share every score);
* ``"qq"``: FedCP-QQ, one number per client, exact coverage guarantee;
* ``"avg"``: FedCP-Avg, the mean of the clients' local conformal quantiles.

The paper's reading: QQ intervals are almost those of central calibration;
Avg is wider, because the mean of local quantiles is pulled up by the clients
that hold outliers. The full 20-seed table (1,000 trees) is printed by
``benchmarks/bench_cqr_synthetic.py``; this example uses fewer trees to stay
well under a minute.
"""

# %%
# One federation, one forest
# --------------------------
import numpy as np
from quantile_forest import RandomForestQuantileRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp import FedCQRRegressor
from skfedcp.datasets import make_romano_regression
from skfedcp.metrics import coverage_score, mean_width_score

ALPHA, M, N = 0.1, 50, 20
STRATEGIES = ["central", "qq", "avg"]


def one_run(seed, n_trees):
    """Train, calibrate three ways, return the test set and the intervals."""
    X, y = make_romano_regression(1000 + M * N + 5000, random_state=seed)
    X_train, y_train = X[:1000], y[:1000]
    X_cal, y_cal = X[1000 : 1000 + M * N], y[1000 : 1000 + M * N]
    X_test, y_test = X[1000 + M * N :], y[1000 + M * N :]
    client_ids = np.repeat(np.arange(M), N)
    forest = RandomForestQuantileRegressor(
        n_estimators=n_trees, min_samples_leaf=40, random_state=seed
    ).fit(X_train, y_train)
    intervals = {}
    for name in STRATEGIES:
        reg = FedCQRRegressor(FrozenEstimator(forest), alpha=ALPHA, calibrator=name)
        reg.fit(X_cal, y_cal, client_ids=client_ids)
        intervals[name] = reg.predict_interval(X_test)
    return X_test, y_test, intervals


X_test, y_test, intervals = one_run(seed=0, n_trees=300)
for name, iv in intervals.items():
    print(
        f"{name:8s} coverage={coverage_score(y_test, iv):.3f} "
        f"mean length={mean_width_score(iv):.3f}"
    )

# %%
# Coverage and length over several seeds
# --------------------------------------
# Each seed redraws all the data and retrains the forest (100 trees here).
n_seeds = 10
coverage = {name: [] for name in STRATEGIES}
length = {name: [] for name in STRATEGIES}
for seed in range(1, n_seeds + 1):
    _, y_s, ivs = one_run(seed, n_trees=100)
    for name, iv in ivs.items():
        coverage[name].append(coverage_score(y_s, iv))
        length[name].append(mean_width_score(iv))
for name in STRATEGIES:
    print(
        f"{name:8s} coverage {np.mean(coverage[name]):.3f} ± "
        f"{np.std(coverage[name], ddof=1):.3f}, length "
        f"{np.mean(length[name]):.3f} ± {np.std(length[name], ddof=1):.3f}"
    )

# %%
# Figure 3: intervals along X, and their coverage and length
# ----------------------------------------------------------
# matplotlib is an optional extra (``pip install "skfedcp[plot]"``).
try:
    import matplotlib.pyplot as plt
except ImportError:  # pragma: no cover
    plt = None

if plt is not None:
    fig, axes = plt.subplots(
        1, 3, figsize=(12, 3.8), gridspec_kw={"width_ratios": [2.2, 1, 1]}
    )
    ax = axes[0]
    order = np.argsort(X_test[:, 0])
    x = X_test[order, 0]
    ax.plot(x, y_test[order], ".", color="0.6", ms=2, label="test points")
    colors = {"central": "C0", "qq": "C1", "avg": "C2"}
    styles = {"central": "-", "qq": "--", "avg": ":"}
    for name, iv in intervals.items():
        for j in (0, 1):
            ax.plot(
                x,
                iv[order, j],
                styles[name],
                color=colors[name],
                lw=1.6,
                label=name if j == 0 else None,
            )
    ax.set_ylim(-2.5, 6)  # fixed range: with outliers, Avg's bounds may leave it
    ax.set_xlabel("X")
    ax.set_ylabel("Y")
    ax.set_title(f"CQR intervals, m={M} clients of n={N}")
    ax.legend(loc="upper left", fontsize=8, ncol=2)

    axes[1].boxplot([coverage[n] for n in STRATEGIES], tick_labels=STRATEGIES)
    axes[1].axhline(1 - ALPHA, color="k", lw=0.8, ls="--")
    axes[1].set_title("test coverage")
    axes[2].boxplot([length[n] for n in STRATEGIES], tick_labels=STRATEGIES)
    axes[2].set_title("mean interval length")
    fig.tight_layout()
