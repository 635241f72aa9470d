"""
====================================================================
Federated chi-square feature selection on the Caravan insurance data
====================================================================

The rows of the CoIL 2000 Caravan data are split into ten clients, one per
customer main type (``MOSHOOFD``), as if ten parties each held one segment.
They want the features most associated with buying a caravan policy
without pooling their customers.
:class:`~skfedcp.feature_selection.FedChi2Selector` runs the FED-chi2
protocol (Pang et al., 2023): the server learns the class counts, the feature
totals and, per feature, a securely aggregated sketch of 50 numbers from
which it estimates the chi-square statistic. We compare its selection with
``SelectKBest(chi2)`` on the pooled data, inside a classification pipeline
where ``client_ids`` is routed to the selector.
"""

# %%
# Data with natural clients
# -------------------------
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency
from sklearn import config_context
from sklearn.feature_selection import SelectKBest, chi2
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp.datasets import load_caravan
from skfedcp.feature_selection import FedChi2Selector, fed_chi2_test

X, y, clients = load_caravan(return_X_y=True, as_frame=True)
print(f"{X.shape[0]} customers, {X.shape[1]} features, {y.mean():.1%} bought")
print("rows per client:", np.bincount(clients)[1:].tolist())

# Each client keeps 30 % of its rows for testing.
X_tr, X_te, y_tr, y_te, c_tr, c_te = train_test_split(
    X, y, clients, test_size=0.3, stratify=clients, random_state=0
)

# %%
# Agreement of the selected features with pooled ``SelectKBest(chi2)``
# ----------------------------------------------------------------------
# ``method="plain"`` securely sums the whole class-by-feature table: it is
# exact (and leaks that table to the server). The sketch estimates each
# statistic from ``n_projections`` numbers; the geometric-mean decoder (the
# paper's) has a mean relative error of about ``sqrt(pi / l)``, the
# mean-square decoder reaches the same accuracy with ~2.5x fewer projections.
k = 15
pooled = SelectKBest(chi2, k=k).fit(X_tr, y_tr)
truth = pooled.scores_
variants = {
    "plain (exact)": {"method": "plain"},
    "geometric, l=50": {"n_projections": 50},
    "geometric, l=200": {"n_projections": 200},
    "mean_square, l=1000": {"n_projections": 1000, "estimator": "mean_square"},
}
fitted = {}
for name, params in variants.items():
    sel = FedChi2Selector(k=k, random_state=0, **params)
    fitted[name] = sel.fit(X_tr, y_tr, client_ids=c_tr)
    same = np.mean(sel.get_support()[pooled.get_support()])
    ok = np.isfinite(truth) & (truth > 0)
    err = np.median(np.abs(sel.scores_[ok] / truth[ok] - 1))
    print(f"{name:22s} top-{k} agreement {same:.2f}   median |rel. error| {err:.3f}")

# %%
# The estimates against the pooled statistic
# ------------------------------------------
fig, ax = plt.subplots(figsize=(5.5, 5))
for name in ["geometric, l=50", "mean_square, l=1000"]:
    ax.loglog(truth, fitted[name].scores_, "o", ms=4, alpha=0.7, label=name)
lims = [np.nanmin(truth[truth > 0]), np.nanmax(truth)]
ax.plot(lims, lims, "k--", lw=1)
ax.set_xlabel("pooled chi2 statistic (sklearn)")
ax.set_ylabel("federated estimate")
ax.set_title("Caravan: 85 features, 10 clients")
ax.legend()
plt.show()

# %%
# A pipeline with ``client_ids`` routed to the selector
# ------------------------------------------------------
# The classic way: ``<step>__client_ids`` in ``fit``.
pipe = Pipeline(
    [
        ("select", FedChi2Selector(k=k, random_state=0)),
        ("scale", StandardScaler()),
        ("clf", LogisticRegression(max_iter=1000)),
    ]
)
pipe.fit(X_tr, y_tr, select__client_ids=c_tr)

# %%
# With metadata routing, the selector requests ``client_ids`` itself.
with config_context(enable_metadata_routing=True):
    routed = make_pipeline(
        FedChi2Selector(k=k, random_state=0).set_fit_request(client_ids=True),
        StandardScaler(),
        LogisticRegression(max_iter=1000),
    )
    routed.fit(X_tr, y_tr, client_ids=c_tr)
assert np.array_equal(routed[0].get_support(), pipe[0].get_support())

# %%
# Downstream accuracy
# -------------------
# Only 6 % of customers buy, so accuracy barely moves from the all-"No"
# baseline; the ranking quality (ROC AUC) is the informative number.
baselines = {
    "federated chi2 (l=50)": pipe,
    "pooled SelectKBest(chi2)": make_pipeline(
        SelectKBest(chi2, k=k), StandardScaler(), LogisticRegression(max_iter=1000)
    ).fit(X_tr, y_tr),
    "all 85 features": make_pipeline(
        StandardScaler(), LogisticRegression(max_iter=1000)
    ).fit(X_tr, y_tr),
}
for name, model in baselines.items():
    proba = model.predict_proba(X_te)[:, 1]
    acc = accuracy_score(y_te, model.predict(X_te))
    print(f"{name:26s} accuracy {acc:.3f}   ROC AUC {roc_auc_score(y_te, proba):.3f}")
print(f"{'always No':26s} accuracy {1 - y_te.mean():.3f}")
print("selected:", list(pipe[0].get_feature_names_out()))

# %%
# The paper's own use: a contingency test of a categorical feature
# -----------------------------------------------------------------
# ``MOSTYPE`` (customer subtype, 40 levels) against the purchase, as one
# 40 x 2 contingency table whose rows are spread over the ten clients.
fed = fed_chi2_test(X["MOSTYPE"], y, clients, n_projections=200, random_state=0)
ref = chi2_contingency(pd.crosstab(X["MOSTYPE"], y), correction=False)
print(f"federated: chi2 = {fed.statistic:.1f}, dof = {fed.dof}, p = {fed.pvalue:.2g}")
print(f"pooled:    chi2 = {ref.statistic:.1f}, dof = {ref.dof}, p = {ref.pvalue:.2g}")
