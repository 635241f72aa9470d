"""
=====================================================================
Federated feature selection inside the wrapped model
=====================================================================

A conformal wrapper can train its own model: given an unfitted pipeline,
:class:`~skfedcp.PrivateConformalClassifier` splits each client's rows into
training and calibration rows and fits the pipeline on the training rows.
When a step of that pipeline is a
:class:`~skfedcp.feature_selection.FedChi2Selector`, the wrapper passes it
the training rows' ``client_ids`` (as ``<step>__client_ids``, in nested
pipelines too), so the selection runs the federated protocol across the
clients instead of treating the rows as one pooled client. We check it on
the Caravan insurance data, whose ten customer main types act as clients,
and compare the chosen features with ``SelectKBest(chi2)`` on pooled rows.
"""

# %%
# Data with natural clients
# -------------------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_selection import SelectKBest, chi2
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

from skfedcp import PrivateConformalClassifier
from skfedcp.datasets import load_caravan
from skfedcp.exceptions import SingleClientWarning
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.metrics import per_client_set_coverage, set_coverage_score

X, y, clients = load_caravan(return_X_y=True, as_frame=True)
names = np.asarray(X.columns)
X_fit, X_te, y_fit, y_te, c_fit, c_te = train_test_split(
    X.to_numpy(),
    y.to_numpy(),
    clients.to_numpy(),
    test_size=0.2,
    stratify=clients,
    random_state=0,
)

# %%
# The selector inside the wrapped pipeline
# ----------------------------------------
# chi-square needs non-negative features, hence ``MinMaxScaler`` first. A
# ``SingleClientWarning`` would mean the selector got no ``client_ids``; we
# turn it into an error to show that it does not happen. The training rows
# are outside the privacy guarantee of the calibration (``epsilon`` covers
# the calibration rows only), which ``fit`` says with a
# :class:`~skfedcp.exceptions.PrivacyLeakWarning`; the selector's federated
# protocol keeps the clients' rows local, it does not add noise.


def wrapper(selector):
    pipe = make_pipeline(MinMaxScaler(), selector, LogisticRegression(max_iter=2000))
    return PrivateConformalClassifier(pipe, alpha=0.1, epsilon=1.0, random_state=0)


with warnings.catch_warnings():
    warnings.simplefilter("error", SingleClientWarning)
    fed = wrapper(FedChi2Selector(k=10, random_state=0))
    fed.fit(X_fit, y_fit, client_ids=c_fit)
selector = fed.estimator_.named_steps["fedchi2selector"]
print("selector's clients:", selector.clients_.tolist())

# %%
# The same wrapper with the pooled ``SelectKBest(chi2)``: the same
# ``random_state`` gives the same training rows, so only the selection
# protocol differs.
pooled = wrapper(SelectKBest(chi2, k=10)).fit(X_fit, y_fit, client_ids=c_fit)
fed_features = set(names[selector.get_support()])
pooled_features = set(names[pooled.estimator_.named_steps["selectkbest"].get_support()])
print("federated :", sorted(fed_features))
print("pooled    :", sorted(pooled_features))
print(f"in common : {len(fed_features & pooled_features)} of 10")

# %%
# Coverage of the conformal sets
# ------------------------------
fig, ax = plt.subplots(figsize=(7, 3.2))
for shift, (label, clf) in enumerate(
    [("FedChi2Selector", fed), ("SelectKBest", pooled)]
):
    sets = clf.predict_set(X_te)
    cov = set_coverage_score(y_te, sets, classes=clf.classes_)
    per = per_client_set_coverage(y_te, sets, c_te, classes=clf.classes_)
    print(f"{label}: coverage {cov:.3f} (target 0.90)")
    ax.bar(per.clients + 0.2 * (2 * shift - 1), per.coverage, width=0.4, label=label)
ax.axhline(0.9, color="k", ls="--", lw=1, label="target")
ax.set_xlabel("client (customer main type)")
ax.set_ylabel("coverage")
ax.set_xticks(np.unique(c_te))
ax.set_ylim(0.5, 1.02)
ax.legend(loc="lower right", ncol=3)
fig.tight_layout()
