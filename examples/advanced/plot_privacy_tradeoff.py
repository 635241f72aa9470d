"""
=====================================================
How much does privacy cost? Coverage and width vs eps
=====================================================

Six study sites of the RAND Health Insurance Experiment calibrate one model
with FedCP²-QQ (``calibrator="dp-qq"``): each site releases one quantile of
its residuals under ``epsilon``-differential privacy, so no site has to
trust the server or the others. Smaller ``epsilon`` means stronger privacy
and noisier quantiles, which the method pays for with wider intervals (the
coverage guarantee ``>= 1 - alpha`` holds at every ``epsilon``).

:class:`~skfedcp.plotting.PrivacyTradeoffDisplay` refits clones of the
estimator across a grid of ``epsilon`` (several seeds each) and draws the
test coverage and the mean interval width against ``epsilon``, with the
non-private QQ calibration as the reference.
"""

# %%
# A frozen model and private calibration data
# -------------------------------------------
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp import FedConformalRegressor
from skfedcp.datasets import load_randhie
from skfedcp.plotting import PrivacyTradeoffDisplay

X, y, site = load_randhie(return_X_y=True)
rng = np.random.default_rng(0)
part = rng.choice(3, size=len(y), p=[0.5, 0.25, 0.25])  # train / calibrate / test
train, cal, test = part == 0, part == 1, part == 2
model = HistGradientBoostingRegressor(random_state=0).fit(X[train], y[train])

# %%
# The private estimator
# ---------------------
# The exponential mechanism needs public bounds on the scores. The target is
# ``log(1 + spend)``, publicly known to lie in [0, 11] for this study, and the
# model predicts within about the same range, so the absolute residuals lie
# in [0, 12]: the bounds come from public knowledge, not from the data.
private = FedConformalRegressor(
    FrozenEstimator(model), alpha=0.1, calibrator="dp-qq", score_bounds=(0.0, 12.0)
)

# %%
# Coverage and width against epsilon
# ----------------------------------
# Three fits per ``epsilon`` with independent seeds, drawn as mean ± one
# standard error. At small ``epsilon`` the sites hold too little data for
# the noise: the threshold is infinite (trivial intervals, coverage 1),
# which the display marks with triangles and reports in one warning.
epsilons = [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
disp = PrivacyTradeoffDisplay.from_estimator(
    private,
    X[cal],
    y[cal],
    X[test],
    y[test],
    client_ids=site[cal],
    epsilons=epsilons,
    n_repeats=3,
    random_state=0,
)

# %%
# Reading the curves
# ------------------
# Coverage stays above the target at every ``epsilon`` (it is guaranteed);
# privacy shows up as width. A rule for choosing ``epsilon``: the smallest
# one whose mean width is within 10 % of the non-private width.
width = disp.size.mean(axis=0)
non_private_width = disp.non_private[1]
ok = np.flatnonzero(width <= 1.10 * non_private_width)
for e, w in zip(epsilons, width, strict=True):
    print(f"epsilon={e:5g}: mean width {w:.3f} ({w / non_private_width:.2f}x)")
if ok.size:
    print(f"smallest epsilon within 10 % of the non-private width: {epsilons[ok[0]]:g}")
