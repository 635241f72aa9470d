"""
===========================================================
Label skew: class-conditional sets cover every client
===========================================================

Twenty clients hold handwritten digits, but not in the same proportions: a
Dirichlet(0.5) label skew gives each client a few dominant digits. A marginal
threshold (one for every class) is calibrated on the pooled mix; it covers
the *average* row at 90 %, over-covers the easy digits and under-covers the
hard ones, so a client whose rows lean on hard digits covers less.

``group_by="class"`` calibrates one threshold per class through the same
one-round federated strategy (each client sends one message per class it
holds). Within a class every client's rows are exchangeable, so every class
covers at least 90 %, and so does every client whatever its mix of classes
(the corollary proved in :ref:`heterogeneity`), with no weights.
"""

# %%
# A frozen model and a label-skew federation
# ------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression

from skfedcp import PrivateConformalClassifier
from skfedcp.datasets import partition_dirichlet
from skfedcp.metrics import client_coverage_test

X, y = load_digits(return_X_y=True)
X = X / 16.0
rng = np.random.default_rng(0)
order = rng.permutation(len(y))
X, y = X[order], y[order]
# A deliberately weak model (few training rows), so that classes differ.
model = FrozenEstimator(LogisticRegression(C=0.05).fit(X[:300], y[:300]))
X_pool, y_pool = X[300:], y[300:]
clients = partition_dirichlet(y_pool, 20, concentration=0.5, random_state=0)
counts = pd.crosstab(clients, y_pool)  # each client's mix of digits
print(counts.iloc[:5])

# %%
# Marginal and class-conditional calibration, over random splits
# --------------------------------------------------------------
# A client is its mix of digits (``counts``, fixed); each split redraws which
# rows of each digit it holds, then halves every client's rows into
# calibration and test rows, so a client's mean coverage over the splits is
# its expected coverage. Both wrappers calibrate with the quantile of
# quantiles (``"qq"``), no privacy.
alpha = 0.1
variants = {
    "marginal": PrivateConformalClassifier(model, calibrator="qq", epsilon=None),
    "class-conditional": PrivateConformalClassifier(
        model, calibrator="qq", epsilon=None, group_by="class"
    ),
}


def split(rng):
    ids = np.empty(len(y_pool), dtype=int)
    for digit in counts.columns:
        rows = rng.permutation(np.flatnonzero(y_pool == digit))
        ids[rows] = np.repeat(counts.index, counts[digit])
    cal = np.zeros(len(y_pool), dtype=bool)
    for c in counts.index:
        rows = rng.permutation(np.flatnonzero(ids == c))
        cal[rows[: len(rows) // 2]] = True
    return ids, cal, ~cal


per_class = {name: [] for name in variants}
per_client = {name: [] for name in variants}
size = {name: [] for name in variants}
for s in range(100):
    clients, cal, test = split(np.random.default_rng(s))
    for name, clf in variants.items():
        clf.fit(X_pool[cal], y_pool[cal], client_ids=clients[cal])
        sets = clf.predict_set(X_pool[test])
        hit = sets[np.arange(test.sum()), y_pool[test]]
        frame = pd.DataFrame(
            {"hit": hit, "class": y_pool[test], "client": clients[test]}
        )
        per_class[name].append(frame.groupby("class")["hit"].mean())
        per_client[name].append(frame.groupby("client")["hit"].mean())
        size[name].append(sets.sum(1).mean())

summary = pd.DataFrame(
    {
        name: {
            "worst class": pd.concat(per_class[name], axis=1).mean(axis=1).min(),
            "worst client": pd.concat(per_client[name], axis=1).mean(axis=1).min(),
            "mean set size": np.mean(size[name]),
        }
        for name in variants
    }
)
print(summary.round(3))

# %%
# Per-class and per-client coverage
# ---------------------------------
# Means over the 100 splits. The marginal threshold leaves the hard digits
# and the clients that hold many of them below the target; class-conditional
# thresholds lift every class, and with them every client.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, table, label in (
    (axes[0], per_class, "class"),
    (axes[1], per_client, "client"),
):
    for offset, (name, values) in zip((-0.2, 0.2), table.items(), strict=True):
        mean = pd.concat(values, axis=1).mean(axis=1)
        ax.bar(mean.index + offset, mean.to_numpy(), width=0.4, label=name)
    ax.axhline(1 - alpha, color="k", ls="--", lw=1)
    ax.set_xlabel(label)
    ax.set_ylim(0.6, 1.0)
axes[0].set_ylabel("mean coverage")
axes[0].legend(loc="lower left")
fig.tight_layout()

# %%
# Which clients under-cover, beyond chance?
# -----------------------------------------
# :func:`~skfedcp.metrics.client_coverage_test` runs an exact binomial test
# per client (or per group) on held-out rows and corrects for testing them
# all (Holm). It runs on one split, as a deployment would: a handful of test
# rows per client gives little power, while the classes, with more rows
# each, expose the marginal threshold's weak digits. The guarantee averages
# over calibration draws too: a class's fitted threshold covers its class
# within about ``sqrt(alpha (1 - alpha) / N_g)``, some 0.04 for the ~70
# calibration rows of a digit, so the test allows ``tolerance=0.05``.
clients, cal, test = split(np.random.default_rng(123))
for name, clf in variants.items():
    clf.fit(X_pool[cal], y_pool[cal], client_ids=clients[cal])
    sets = clf.predict_set(X_pool[test])
    covered = sets[np.arange(test.sum()), y_pool[test]]
    print(f"--- {name}, per client")
    print(client_coverage_test(covered, clients[test], alpha=alpha, tolerance=0.05))
    print(f"--- {name}, per class")
    print(client_coverage_test(covered, y_pool[test], alpha=alpha, tolerance=0.05))

# %%
# The class thresholds, and what the server learnt
# ------------------------------------------------
# ``threshold_`` has one entry per class (``groups_``). Each client sent one
# message per class it holds: the server learnt every client's label counts
# (``calibrator_.messages_["n"]``), on top of the quantile of each cell.
clf = variants["class-conditional"]
print(pd.Series(clf.threshold_, index=clf.groups_, name="threshold").round(3))
cells = clf.calibrator_.messages_
print(f"{len(cells['client'])} messages from {clf.n_clients_} clients")
