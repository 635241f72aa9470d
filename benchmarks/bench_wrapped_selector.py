"""A FedChi2Selector inside the wrapped pipeline, on Caravan's ten clients.

Acceptance script of issue 24. ``PrivateConformalClassifier(make_pipeline(
MinMaxScaler(), FedChi2Selector(k=10), LogisticRegression()))`` is fitted
with ``client_ids``: the wrapper splits each client's rows into training and
calibration rows and trains its pipeline on the training rows, passing their
``client_ids`` to every step whose ``fit`` takes them, so the selector runs
the federated protocol (no ``SingleClientWarning``, which this script turns
into an error). Printed:

* the selector's clients (``clients_``) against the training rows' clients;
* its chosen features beside the non-federated ``SelectKBest(chi2, k=10)``
  in the same wrapper (same ``random_state``, hence the same training rows),
  for the default sketch protocol and the exact ``method="plain"``;
* coverage and mean set size of the conformal sets on held-out rows (20% of
  each client), overall and per client, for each layout.

Run: ``python benchmarks/bench_wrapped_selector.py`` (``--quick``: one seed).
"""

import argparse
import warnings

import _common  # noqa: F401
import numpy as np
from sklearn.feature_selection import SelectKBest, chi2
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

from skfedcp import PrivateConformalClassifier
from skfedcp.datasets import load_caravan
from skfedcp.exceptions import PrivacyLeakWarning, SingleClientWarning
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.metrics import per_client_set_coverage, set_coverage_score, set_size_score

K = 10
ALPHA = 0.1
EPSILON = 1.0


def wrapped(selector, seed):
    pipe = make_pipeline(MinMaxScaler(), selector, LogisticRegression(max_iter=2000))
    return PrivateConformalClassifier(
        pipe, alpha=ALPHA, epsilon=EPSILON, random_state=seed
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed")
    parser.add_argument("--n-seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = [0] if args.quick else list(range(args.n_seeds))
    X, y, clients = load_caravan(return_X_y=True, as_frame=True)
    names = np.asarray(X.columns)
    X = X.to_numpy()
    y = np.asarray(y)
    clients = np.asarray(clients)
    print(
        f"Caravan: {X.shape[0]} rows x {X.shape[1]} features, {y.mean():.1%} "
        f"positive, {np.unique(clients).size} clients (customer main type); "
        f"k={K}, alpha={ALPHA}, dp-central epsilon={EPSILON}"
    )
    warnings.simplefilter("error", SingleClientWarning)
    # The pipeline trains on rows outside the privacy guarantee (said once).
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    layouts = {
        "FedChi2Selector (sketch)": lambda s: FedChi2Selector(k=K, random_state=s),
        "FedChi2Selector (plain)": lambda s: FedChi2Selector(k=K, method="plain"),
        "SelectKBest(chi2), pooled": lambda s: SelectKBest(chi2, k=K),
    }
    summary = {name: {"coverage": [], "size": [], "worst": []} for name in layouts}
    overlap = {name: [] for name in layouts}
    for seed in seeds:
        X_fit, X_te, y_fit, y_te, c_fit, c_te = train_test_split(
            X, y, clients, test_size=0.2, stratify=clients, random_state=seed
        )
        chosen = {}
        for name, make in layouts.items():
            clf = wrapped(make(seed), seed).fit(X_fit, y_fit, client_ids=c_fit)
            step = clf.estimator_.steps[1][1]
            chosen[name] = set(names[step.get_support(indices=True)])
            if isinstance(step, FedChi2Selector):
                ok = np.array_equal(step.clients_, np.unique(c_fit))
                if seed == seeds[0]:
                    print(
                        f"\n{name}: clients_ {step.clients_.tolist()} "
                        f"(the training rows' clients: {ok})"
                    )
                assert ok
            sets = clf.predict_set(X_te)
            summary[name]["coverage"].append(
                set_coverage_score(y_te, sets, classes=clf.classes_)
            )
            summary[name]["size"].append(set_size_score(sets))
            per_client = per_client_set_coverage(y_te, sets, c_te, classes=clf.classes_)
            summary[name]["worst"].append(float(np.min(per_client.coverage)))
        pooled = chosen["SelectKBest(chi2), pooled"]
        for name in layouts:
            overlap[name].append(len(chosen[name] & pooled))
        if seed == seeds[0]:
            print(f"\nfeatures chosen (seed {seed}):")
            for name, feats in chosen.items():
                print(f"  {name:<27} {sorted(feats)}")
    print(f"\nover {len(seeds)} seed(s): overlap with pooled SelectKBest, coverage")
    for name in layouts:
        s = summary[name]
        print(
            f"  {name:<27} overlap {np.mean(overlap[name]):.1f}/{K}  coverage "
            f"{np.mean(s['coverage']):.4f} (target {1 - ALPHA:.2f})  "
            f"worst client {np.mean(s['worst']):.4f}  mean set size "
            f"{np.mean(s['size']):.3f}"
        )
    path = _common.save_record(
        "bench_wrapped_selector",
        {
            "k": K,
            "alpha": ALPHA,
            "epsilon": EPSILON,
            "seeds": seeds,
            "overlap": {n: float(np.mean(v)) for n, v in overlap.items()},
            "coverage": {n: float(np.mean(s["coverage"])) for n, s in summary.items()},
        },
    )
    print(f"\nrecord: {path}")


if __name__ == "__main__":
    main()
