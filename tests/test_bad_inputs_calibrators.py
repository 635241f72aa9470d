"""Bad inputs to the calibrators' steps and the privacy functions (issue 11).

Each case is a call that must fail early with a clear error: the exception
type and a message naming the argument (or, for a message, the client and
the field). None may be obscure (an error from deep inside NumPy) or silent
(a wrong result). Estimators, metrics and FED-chi2 have their own suites
(``test_bad_inputs_estimators.py``, ``feature_selection/test_chi2_bad_inputs.py``).
"""

import numpy as np
import pytest

from skfedcp.calibrators import (
    AveragingCalibrator,
    CentralCalibrator,
    LDPLabelCalibrator,
    LDPScoreCalibrator,
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
    get_calibrator,
    ldp_correction,
    ldp_sample_size,
    qq_coverage,
    select_qq_ranks,
)
from skfedcp.exceptions import InvalidMessageError
from skfedcp.privacy import (
    binary_randomized_response,
    debias_fraction,
    debias_frequencies,
    dp_qq_local_correction,
    exponential_mechanism,
    k_ary_randomized_response,
    private_conformal_gamma,
    private_conformal_level,
    private_conformal_n_bins,
    private_quantile,
    private_quantile_probabilities,
)

NAN = float("nan")
INF = float("inf")
SIZES = [30] * 5
QQ = QuantileOfQuantilesCalibrator
DPQQ = lambda: PrivateQuantileOfQuantilesCalibrator(  # noqa: E731
    epsilon=5.0, score_bounds=(0, 1), n_bins=20
)
DPC = lambda: PrivateCentralCalibrator(epsilon=5.0, score_bounds=(0, 1))  # noqa: E731


def _qq_msgs(**change):
    msgs = [{"n": 30, "quantile": 1.0 + j} for j in range(5)]
    msgs[2] = {**msgs[2], **change}
    return msgs


def _central_msgs(scores):
    msgs = [{"n": 30, "scores": np.ones(30)} for _ in range(5)]
    msgs[1] = {"n": 30, "scores": scores}
    return msgs


def _ldpl_msgs(**change):
    msgs = [
        {"n": 4, "scores": np.full((4, 3), 0.5), "noisy_labels": np.arange(4) % 3}
        for _ in range(3)
    ]
    msgs[1] = {**msgs[1], **change}
    return msgs


SCORES = np.linspace(0.1, 0.9, 30)
IDS = np.repeat(np.arange(3), 10)

CASES = {
    # -- client steps: one client's own checks --------------------------------
    "qq client NaN score": (
        lambda: QQ().client_step(
            np.r_[SCORES[:-1], NAN], alpha=0.1, n_per_client=SIZES
        ),
        ValueError,
        "scores must be finite",
    ),
    "qq client 2-D scores": (
        lambda: QQ().client_step(np.ones((30, 2)), alpha=0.1, n_per_client=SIZES),
        ValueError,
        "scores must be 1-D",
    ),
    "qq client string scores": (
        lambda: QQ().client_step("abc", alpha=0.1, n_per_client=SIZES),
        TypeError,
        "scores must be an array of numbers",
    ),
    "qq client n_per_client None": (
        lambda: QQ().client_step(SCORES, alpha=0.1, n_per_client=None),
        TypeError,
        "n_per_client must be",
    ),
    "qq client n_per_client negative": (
        lambda: QQ().client_step(SCORES, alpha=0.1, n_per_client=[30, -1]),
        ValueError,
        "n_per_client must hold non-negative",
    ),
    "qq client n_per_client floats": (
        lambda: QQ().client_step(SCORES, alpha=0.1, n_per_client=[30.5, 30]),
        ValueError,
        "n_per_client must hold integers",
    ),
    "qq client n_per_client 2-D": (
        lambda: QQ().client_step(SCORES, alpha=0.1, n_per_client=[[30, 30]]),
        ValueError,
        "n_per_client must list",
    ),
    "qq client n_per_client strings": (
        lambda: QQ().client_step(SCORES, alpha=0.1, n_per_client=["30", "30"]),
        TypeError,
        "n_per_client must hold non-negative integers",
    ),
    "qq client size not announced": (
        lambda: QQ().client_step(SCORES, alpha=0.1, n_per_client=[10, 20]),
        ValueError,
        "n_per_client lists no client of that size",
    ),
    "qq client alpha 1.5": (
        lambda: QQ().client_step(SCORES, alpha=1.5, n_per_client=SIZES),
        ValueError,
        "alpha must be in the open interval",
    ),
    "qq client alpha string": (
        lambda: QQ().client_step(SCORES, alpha="0.1", n_per_client=SIZES),
        TypeError,
        "alpha must be a float",
    ),
    "avg client NaN": (
        lambda: AveragingCalibrator().client_step([1.0, NAN], alpha=0.1),
        ValueError,
        "scores must be finite",
    ),
    "avg client alpha 0": (
        lambda: AveragingCalibrator().client_step(SCORES, alpha=0.0),
        ValueError,
        "alpha must be in the open interval",
    ),
    "central client inf": (
        lambda: CentralCalibrator().client_step([1.0, INF], alpha=0.1),
        ValueError,
        "scores must be finite",
    ),
    "dp-central client NaN": (
        lambda: DPC().client_step([0.1, NAN], alpha=0.1),
        ValueError,
        "scores must not contain NaN",
    ),
    "dp-qq client NaN": (
        lambda: DPQQ().client_step(
            np.r_[SCORES[:-1], NAN], alpha=0.1, n_per_client=SIZES
        ),
        ValueError,
        "scores must not contain NaN",
    ),
    "dp-qq client no bounds": (
        lambda: PrivateQuantileOfQuantilesCalibrator(epsilon=1.0).client_step(
            SCORES, alpha=0.1, n_per_client=SIZES
        ),
        ValueError,
        "needs score_bounds",
    ),
    "dp-qq client bad epsilon": (
        lambda: PrivateQuantileOfQuantilesCalibrator(
            epsilon=-1.0, score_bounds=(0, 1)
        ).client_step(SCORES, alpha=0.1, n_per_client=SIZES),
        ValueError,
        "epsilon",
    ),
    "dp-qq client reversed bounds": (
        lambda: PrivateQuantileOfQuantilesCalibrator(
            epsilon=1.0, score_bounds=(1, 0)
        ).client_step(SCORES, alpha=0.1, n_per_client=SIZES),
        ValueError,
        "score_bounds",
    ),
    "ldp-l client labels length": (
        lambda: LDPLabelCalibrator().client_step(np.ones((4, 3)), labels=[0, 1]),
        ValueError,
        "labels must be 1-D with one entry per row",
    ),
    "ldp-l client 1-D scores": (
        lambda: LDPLabelCalibrator().client_step(np.ones(4), labels=[0, 1, 0, 1]),
        ValueError,
        "scores must be 2-D",
    ),
    "ldp-l client label out of range": (
        lambda: LDPLabelCalibrator().client_step(np.ones((2, 3)), labels=[0, 3]),
        ValueError,
        "labels",
    ),
    "ldp-s client query not a dict": (
        lambda: LDPScoreCalibrator(score_bounds=(0, 1)).client_respond(SCORES, 3),
        ValueError,
        "query must be a dict",
    ),
    "ldp-s client users out of range": (
        lambda: LDPScoreCalibrator(score_bounds=(0, 1)).client_respond(
            SCORES, {"round": 1, "threshold": 0.5, "users": [0, 99]}
        ),
        ValueError,
        "query\\['users'\\] must lie in",
    ),
    "ldp-s client NaN scores": (
        lambda: LDPScoreCalibrator(score_bounds=(0, 1)).client_respond(
            [NAN, 0.1], {"round": 1, "threshold": 0.5, "users": [0]}
        ),
        ValueError,
        "scores must not contain NaN",
    ),
    # -- server steps: every message checked against the plan ----------------
    "qq server NaN": (
        lambda: QQ().server_step(_qq_msgs(quantile=NAN), alpha=0.1, n_per_client=SIZES),
        InvalidMessageError,
        "client 2: field 'quantile'",
    ),
    "qq server None": (
        lambda: QQ().server_step(
            _qq_msgs(quantile=None), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 2: field 'quantile'",
    ),
    "qq server -inf": (
        lambda: QQ().server_step(
            _qq_msgs(quantile=-INF), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 2: field 'quantile'",
    ),
    "qq server +inf within rank": (
        lambda: QQ().server_step(_qq_msgs(quantile=INF), alpha=0.1, n_per_client=SIZES),
        InvalidMessageError,
        "must send a finite number",
    ),
    "qq server array value": (
        lambda: QQ().server_step(
            _qq_msgs(quantile=np.ones(2)), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 2: field 'quantile'",
    ),
    "qq server missing quantile": (
        lambda: QQ().server_step(
            [{"n": 30, "quantile": 1.0}] * 4 + [{"n": 30}],
            alpha=0.1,
            n_per_client=SIZES,
        ),
        InvalidMessageError,
        "client 4: field 'quantile' is missing",
    ),
    "qq server size lies": (
        lambda: QQ().server_step(_qq_msgs(n=7), alpha=0.1, n_per_client=SIZES),
        InvalidMessageError,
        "client 2: field 'n' is 7 but the client announced 30",
    ),
    "qq server negative size": (
        lambda: QQ().server_step(_qq_msgs(n=-30), alpha=0.1, n_per_client=SIZES),
        InvalidMessageError,
        "field 'n' must be a non-negative integer",
    ),
    "qq server bool size": (
        lambda: QQ().server_step(_qq_msgs(n=True), alpha=0.1, n_per_client=SIZES),
        InvalidMessageError,
        "field 'n' must be one real number",
    ),
    "qq server not a dict": (
        lambda: QQ().server_step(
            [{"n": 30, "quantile": 1.0}] * 4 + [1.0], alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 4: must be a dict",
    ),
    "qq server too few messages": (
        lambda: QQ().server_step(_qq_msgs()[:3], alpha=0.1, n_per_client=SIZES),
        InvalidMessageError,
        "3 message\\(s\\) for 5 announced",
    ),
    "qq server messages not a list": (
        lambda: QQ().server_step(3.0, alpha=0.1, n_per_client=SIZES),
        TypeError,
        "messages must be a list of dicts",
    ),
    "qq server n_per_client None": (
        lambda: QQ().server_step(_qq_msgs(), alpha=0.1, n_per_client=None),
        TypeError,
        "n_per_client must be",
    ),
    "qq server n_per_client negative": (
        lambda: QQ().server_step(
            _qq_msgs(), alpha=0.1, n_per_client=[30, 30, 30, 30, -30]
        ),
        ValueError,
        "n_per_client must hold non-negative",
    ),
    "qq server stacked wrong length": (
        lambda: QQ().server_step(
            {"n": np.array([30] * 4), "quantile": np.ones(4)},
            alpha=0.1,
            n_per_client=SIZES,
        ),
        InvalidMessageError,
        "stacked field 'n' must hold one entry per announced",
    ),
    "qq server stacked extra field": (
        lambda: QQ().server_step(
            {"n": np.array(SIZES), "quantile": np.ones(5), "scores": np.ones(5)},
            alpha=0.1,
            n_per_client=SIZES,
        ),
        InvalidMessageError,
        "unexpected \\['scores'\\]",
    ),
    "qq fit_from_messages bad on_invalid": (
        lambda: QQ().fit_from_messages(
            _qq_msgs(), alpha=0.1, n_per_client=SIZES, on_invalid="ignore"
        ),
        ValueError,
        "on_invalid must be",
    ),
    "qq fit_from_messages repeated client labels": (
        lambda: QQ().fit_from_messages(
            _qq_msgs(), alpha=0.1, n_per_client=SIZES, clients=[0, 0, 1, 2, 3]
        ),
        ValueError,
        "clients must not repeat",
    ),
    "qq fit_from_messages wrong number of labels": (
        lambda: QQ().fit_from_messages(
            _qq_msgs(), alpha=0.1, n_per_client=SIZES, clients=[0, 1]
        ),
        ValueError,
        "clients must hold one label per client",
    ),
    "avg server NaN": (
        lambda: AveragingCalibrator().server_step(
            _qq_msgs(quantile=NAN), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 2: field 'quantile'",
    ),
    "avg server -inf": (
        lambda: AveragingCalibrator().server_step(
            _qq_msgs(quantile=-INF), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 2: field 'quantile'",
    ),
    "avg server +inf within rank": (
        lambda: AveragingCalibrator().server_step(
            _qq_msgs(quantile=INF), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "must send a finite number",
    ),
    "central server NaN score": (
        lambda: CentralCalibrator().server_step(
            _central_msgs(np.r_[np.ones(29), NAN]), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "client 1: field 'scores' must hold finite",
    ),
    "central server wrong length": (
        lambda: CentralCalibrator().server_step(
            _central_msgs(np.ones(12)), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "field 'scores' must have shape \\(30,\\)",
    ),
    "central server 2-D scores": (
        lambda: CentralCalibrator().server_step(
            _central_msgs(np.ones((30, 2))), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "field 'scores' must have shape",
    ),
    "central server text scores": (
        lambda: CentralCalibrator().server_step(
            _central_msgs(["a"] * 30), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "field 'scores' must be an array of real numbers",
    ),
    "dp-central server out of bounds": (
        lambda: DPC().server_step(
            _central_msgs(np.full(30, 2.0)), alpha=0.1, n_per_client=SIZES
        ),
        InvalidMessageError,
        "must lie within score_bounds",
    ),
    "dp-qq server off grid": (
        lambda: DPQQ().server_step(
            [{"n": 200, "quantile": 0.5}] * 4 + [{"n": 200, "quantile": 0.51}],
            alpha=0.1,
            n_per_client=[200] * 5,
        ),
        InvalidMessageError,
        "client 4: field 'quantile' is 0.51, not a bin edge",
    ),
    "dp-qq server 1e308": (
        lambda: DPQQ().server_step(
            [{"n": 200, "quantile": 0.5}] * 4 + [{"n": 200, "quantile": 1e308}],
            alpha=0.1,
            n_per_client=[200] * 5,
        ),
        InvalidMessageError,
        "not a bin edge",
    ),
    "dp-qq server NaN": (
        lambda: DPQQ().server_step(
            [{"n": 200, "quantile": NAN}] + [{"n": 200, "quantile": 0.5}] * 4,
            alpha=0.1,
            n_per_client=[200] * 5,
        ),
        InvalidMessageError,
        "client 0: field 'quantile'",
    ),
    "dp-qq server lower bound edge": (
        # e_0 is never released (the first bin's upper edge e_1 is).
        lambda: DPQQ().server_step(
            [{"n": 200, "quantile": 0.0}] + [{"n": 200, "quantile": 0.5}] * 4,
            alpha=0.1,
            n_per_client=[200] * 5,
        ),
        InvalidMessageError,
        "not a bin edge",
    ),
    "ldp-l server label too large": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(noisy_labels=np.array([0, 1, 2, 3])), alpha=0.1
        ),
        InvalidMessageError,
        "client 1: field 'noisy_labels' must be integers in 0..2",
    ),
    "ldp-l server negative label": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(noisy_labels=np.array([0, -1, 2, 0])), alpha=0.1
        ),
        InvalidMessageError,
        "client 1: field 'noisy_labels' must hold non-negative",
    ),
    "ldp-l server float labels": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(noisy_labels=np.array([0.5, 1, 2, 0])), alpha=0.1
        ),
        InvalidMessageError,
        "field 'noisy_labels' must hold non-negative integers",
    ),
    "ldp-l server other width": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(scores=np.full((4, 5), 0.5)), alpha=0.1
        ),
        InvalidMessageError,
        "client 1: field 'scores' has 5 columns",
    ),
    "ldp-l server NaN scores": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(scores=np.full((4, 3), NAN)), alpha=0.1
        ),
        InvalidMessageError,
        "client 1: field 'scores' must hold finite",
    ),
    "ldp-l server missing labels": (
        lambda: LDPLabelCalibrator().server_step(
            [{"n": 4, "scores": np.ones((4, 3))}], alpha=0.1
        ),
        InvalidMessageError,
        "field 'noisy_labels' is missing",
    ),
    # Issue 22: an unsigned label 2**64 - 1 wrapped to the last class.
    "ldp-l server uint64 label 2**64-1": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(noisy_labels=np.array([0, 1, 2, 2**64 - 1], dtype=np.uint64)),
            alpha=0.1,
        ),
        InvalidMessageError,
        # Compared in its own dtype before any int64 cast (never -1).
        "client 1: field 'noisy_labels' holds a label of 18446744073709551615, "
        "beyond any class index",
    ),
    "ldp-l server uint64 label 2**63": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(noisy_labels=np.array([0, 1, 2, 2**63], dtype=np.uint64)),
            alpha=0.1,
        ),
        InvalidMessageError,
        "client 1: field 'noisy_labels' holds a label of 9223372036854775808",
    ),
    "ldp-l server uint64 label 3 (in range of int64, not of the classes)": (
        lambda: LDPLabelCalibrator().server_step(
            _ldpl_msgs(noisy_labels=np.array([0, 1, 2, 3], dtype=np.uint64)),
            alpha=0.1,
        ),
        InvalidMessageError,
        "client 1: field 'noisy_labels' must be integers in 0..2",
    ),
    "central fit complex scores": (
        lambda: CentralCalibrator().fit(SCORES + 0j, IDS, alpha=0.1),
        TypeError,
        r"scores must hold real numbers; got a complex array \(dtype complex128\)",
    ),
    "central fit masked scores": (
        lambda: CentralCalibrator().fit(
            np.ma.masked_array(SCORES, SCORES > 0.8), IDS, alpha=0.1
        ),
        TypeError,
        "scores must not be a masked array",
    ),
    "dp-central fit complex scores": (
        lambda: PrivateCentralCalibrator(epsilon=1.0, score_bounds=(0, 1)).fit(
            SCORES.astype(np.complex64), IDS, alpha=0.1
        ),
        TypeError,
        "scores must hold real numbers",
    ),
    "dp-central fit masked scores": (
        lambda: PrivateCentralCalibrator(epsilon=1.0, score_bounds=(0, 1)).fit(
            np.ma.masked_array(SCORES, SCORES > 0.8), IDS, alpha=0.1
        ),
        TypeError,
        "scores must not be a masked array",
    ),
    "central server complex scores": (
        lambda: CentralCalibrator().server_step(
            [
                {"n": 2, "scores": np.array([0.1, 0.2])},
                {"n": 2, "scores": np.array([0.1 + 1j, 0.2])},
            ],
            alpha=0.1,
            n_per_client=[2, 2],
        ),
        InvalidMessageError,
        "client 1: field 'scores' must be an array of real numbers; got dtype "
        "complex128",
    ),
    "central server masked scores": (
        lambda: CentralCalibrator().server_step(
            [
                {"n": 2, "scores": np.array([0.1, 0.2])},
                {"n": 2, "scores": np.ma.masked_array([0.1, 0.2], [0, 1])},
            ],
            alpha=0.1,
            n_per_client=[2, 2],
        ),
        InvalidMessageError,
        "client 1: field 'scores' must be an array of real numbers; got a masked",
    ),
    "ldp-l fit complex score matrix": (
        lambda: LDPLabelCalibrator().fit(
            np.full((4, 3), 0.5 + 0j), labels=np.array([0, 1, 2, 0]), alpha=0.1
        ),
        TypeError,
        "scores must hold real numbers",
    ),
    "ldp-s fit masked scores": (
        lambda: LDPScoreCalibrator(epsilon=1.0, score_bounds=(0, 1)).fit(
            np.ma.masked_array(SCORES, SCORES > 0.8), IDS, alpha=0.1
        ),
        TypeError,
        "scores must not be a masked array",
    ),
    # Issue 22: the class count is public; a message of another width is
    # invalid whatever the other clients send.
    "ldp-l server public n_classes other width": (
        lambda: LDPLabelCalibrator(n_classes=3).server_step(
            _ldpl_msgs(scores=np.full((4, 2), 0.5)), alpha=0.1
        ),
        InvalidMessageError,
        "client 1: field 'scores' has 2 columns; the plan has 3",
    ),
    "ldp-l server public n_classes all other width": (
        lambda: LDPLabelCalibrator(n_classes=4).server_step(_ldpl_msgs(), alpha=0.1),
        InvalidMessageError,
        "client 0: field 'scores' has 3 columns; the plan has 4",
    ),
    "ldp-l server widths disagree, no public n_classes": (
        lambda: LDPLabelCalibrator().fit_from_messages(
            _ldpl_msgs(scores=np.full((4, 2), 0.5), noisy_labels=np.zeros(4, int)),
            alpha=0.1,
            n_per_client=[4] * 3,
            on_invalid="exclude",
        ),
        InvalidMessageError,
        "invalid messages: client 1: field 'scores' has 2 columns, but client 0 "
        "sends 3.*set n_classes",
    ),
    "ldp-l fit uint64 label 2**64-1": (
        lambda: LDPLabelCalibrator().fit(
            np.full((4, 3), 0.5),
            labels=np.array([0, 1, 2, 2**64 - 1], dtype=np.uint64),
            alpha=0.1,
        ),
        ValueError,
        r"labels must lie in 0..2 .*got values in \[0, 18446744073709551615\]",
    ),
    "ldp-l client_step float label 2**64": (
        lambda: LDPLabelCalibrator().client_step(
            np.full((4, 3), 0.5), labels=np.array([0.0, 1.0, 2.0, 2.0**64])
        ),
        ValueError,
        "labels must lie in 0..2",
    ),
    "ldp-l fit string labels": (
        lambda: LDPLabelCalibrator().fit(
            np.full((4, 3), 0.5), labels=np.array(["a", "b", "c", "a"]), alpha=0.1
        ),
        TypeError,
        "labels must hold integer class codes",
    ),
    "ldp-l fit width other than n_classes": (
        lambda: LDPLabelCalibrator(n_classes=4).fit(
            np.full((4, 3), 0.5), labels=np.arange(4) % 3, alpha=0.1
        ),
        ValueError,
        "scores must have n_classes=4 columns",
    ),
    "ldp-l n_classes 1": (
        lambda: LDPLabelCalibrator(n_classes=1).fit(
            np.full((4, 3), 0.5), labels=np.arange(4) % 3, alpha=0.1
        ),
        ValueError,
        "n_classes",
    ),
    # -- fit -----------------------------------------------------------------
    "qq fit NaN score": (
        lambda: QQ().fit(np.r_[SCORES[:-1], NAN], IDS, alpha=0.1),
        ValueError,
        "scores must be finite",
    ),
    "central fit NaN score": (
        lambda: CentralCalibrator().fit([1.0, NAN, 2.0], alpha=0.1),
        ValueError,
        "scores must be finite",
    ),
    "qq fit client_ids length": (
        lambda: QQ().fit(SCORES, IDS[:5], alpha=0.1),
        ValueError,
        "client_ids has 5 entries",
    ),
    "qq fit client_ids NaN": (
        lambda: QQ().fit(SCORES, np.r_[IDS[:-1], NAN], alpha=0.1),
        ValueError,
        "client_ids must not contain NaN",
    ),
    "qq fit alpha None": (
        lambda: QQ().fit(SCORES, IDS, alpha=None),
        TypeError,
        "alpha must be a float",
    ),
    "qq fit bad random_state": (
        lambda: DPQQ().fit(SCORES, IDS, alpha=0.1, random_state="seed"),
        TypeError,
        "random_state must be",
    ),
    "qq fit negative random_state": (
        lambda: DPQQ().fit(SCORES, IDS, alpha=0.1, random_state=-3),
        ValueError,
        "random_state must be a non-negative int",
    ),
    "qq bad local_rank": (
        lambda: QQ(local_rank=0).fit(SCORES, IDS, alpha=0.1),
        ValueError,
        "local_rank",
    ),
    "ldp-l fit without labels": (
        lambda: LDPLabelCalibrator().fit(np.ones((6, 3)), alpha=0.1),
        ValueError,
        "needs labels=",
    ),
    "ldp-s fit_from_messages without seed": (
        lambda: LDPScoreCalibrator(score_bounds=(0, 1)).fit_from_messages(
            [], alpha=0.1, n_per_client=[100]
        ),
        ValueError,
        "random_state must be the seed given to server_init",
    ),
    "get_calibrator unknown": (
        lambda: get_calibrator("quantile"),
        ValueError,
        "calibrator must be one of",
    ),
    "get_calibrator type": (
        lambda: get_calibrator(3),
        TypeError,
        "calibrator must be a string alias",
    ),
    # -- rank selection and exact coverage ------------------------------------
    "select_qq_ranks alpha": (
        lambda: select_qq_ranks((10, 10), 1.2),
        ValueError,
        "alpha",
    ),
    "select_qq_ranks empty sizes": (
        lambda: select_qq_ranks((), 0.1),
        ValueError,
        "n_per_client|sizes",
    ),
    "qq_coverage k > m": (
        lambda: qq_coverage(5, 10, 3, 9),
        ValueError,
        "k",
    ),
    "qq_coverage l > n": (
        lambda: qq_coverage(5, 10, 11, 2),
        ValueError,
        "l",
    ),
    # -- privacy functions ---------------------------------------------------
    "private_quantile NaN": (
        lambda: private_quantile(
            [0.1, NAN], 0.9, epsilon=1.0, bounds=(0, 1), n_bins=10
        ),
        ValueError,
        "scores",
    ),
    "private_quantile level 1.5": (
        lambda: private_quantile(SCORES, 1.5, epsilon=1.0, bounds=(0, 1), n_bins=10),
        ValueError,
        "level",
    ),
    "private_quantile epsilon 0": (
        lambda: private_quantile(SCORES, 0.9, epsilon=0.0, bounds=(0, 1), n_bins=10),
        ValueError,
        "epsilon",
    ),
    "private_quantile epsilon inf": (
        lambda: private_quantile(SCORES, 0.9, epsilon=INF, bounds=(0, 1), n_bins=10),
        ValueError,
        "epsilon",
    ),
    "private_quantile infinite bounds": (
        lambda: private_quantile(SCORES, 0.9, epsilon=1.0, bounds=(0, INF), n_bins=10),
        ValueError,
        "bounds",
    ),
    "private_quantile one bin": (
        lambda: private_quantile(SCORES, 0.9, epsilon=1.0, bounds=(0, 1), n_bins=1),
        ValueError,
        "n_bins",
    ),
    "private_quantile bad source": (
        lambda: private_quantile(
            SCORES, 0.9, epsilon=1.0, bounds=(0, 1), n_bins=10, random_state="os"
        ),
        ValueError,
        "random_state",
    ),
    "private_quantile_probabilities 2-D": (
        lambda: private_quantile_probabilities(
            np.ones((3, 3)), 0.9, epsilon=1.0, bounds=(0, 1), n_bins=10
        ),
        ValueError,
        "scores",
    ),
    "exponential_mechanism NaN utility": (
        lambda: exponential_mechanism([0.0, NAN], epsilon=1.0, sensitivity=1.0),
        ValueError,
        "utility",
    ),
    "exponential_mechanism sensitivity 0": (
        lambda: exponential_mechanism([0.0, 1.0], epsilon=1.0, sensitivity=0.0),
        ValueError,
        "sensitivity",
    ),
    "k-RR label out of range": (
        lambda: k_ary_randomized_response([0, 5], n_classes=3, epsilon=1.0),
        ValueError,
        "labels",
    ),
    "k-RR one class": (
        lambda: k_ary_randomized_response([0, 0], n_classes=1, epsilon=1.0),
        ValueError,
        "n_classes",
    ),
    "k-RR float labels": (
        lambda: k_ary_randomized_response([0.5, 1.0], n_classes=3, epsilon=1.0),
        ValueError,
        "labels",
    ),
    "binary RR bits 2": (
        lambda: binary_randomized_response([0, 2], epsilon=1.0),
        ValueError,
        "bits",
    ),
    "binary RR epsilon negative": (
        lambda: binary_randomized_response([0, 1], epsilon=-1.0),
        ValueError,
        "epsilon",
    ),
    "debias_fraction above 1": (
        lambda: debias_fraction(1.5, epsilon=1.0),
        ValueError,
        "noisy_fraction",
    ),
    "debias_fraction NaN": (
        lambda: debias_fraction(NAN, epsilon=1.0),
        ValueError,
        "noisy_fraction",
    ),
    "debias_frequencies wrong length": (
        lambda: debias_frequencies([0.5, 0.5], n_classes=3, epsilon=1.0),
        ValueError,
        "n_classes|noisy",
    ),
    "private_conformal_level n -1": (
        lambda: private_conformal_level(-1, 0.1, epsilon=1.0, n_bins=10),
        ValueError,
        "n",
    ),
    "private_conformal_level alpha 0.7": (
        lambda: private_conformal_level(100, 0.7, epsilon=1.0, n_bins=10),
        ValueError,
        "alpha",
    ),
    "private_conformal_gamma epsilon string": (
        lambda: private_conformal_gamma(100, 0.1, epsilon="1"),
        TypeError,
        "epsilon",
    ),
    "private_conformal_n_bins n float": (
        lambda: private_conformal_n_bins(100.5, 0.1, epsilon=1.0),
        TypeError,
        "n",
    ),
    "dp_qq_local_correction gamma 1": (
        lambda: dp_qq_local_correction(1.0, 10, 1.0, 0.1, 5),
        ValueError,
        "gamma",
    ),
    "dp_qq_local_correction clients 0": (
        lambda: dp_qq_local_correction(1.0, 10, 0.5, 0.1, 0),
        ValueError,
        "n_clients",
    ),
    "ldp_correction n 0": (
        lambda: ldp_correction(0, 3, 1.0),
        ValueError,
        "n",
    ),
    "ldp_correction delta 1": (
        lambda: ldp_correction(100, 3, 1.0, delta=1.0),
        ValueError,
        "delta",
    ),
    "ldp_sample_size correction 0": (
        lambda: ldp_sample_size(0.0, 3, 1.0),
        ValueError,
        "correction",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_gives_a_clear_error(name):
    call, exception, match = CASES[name]
    with pytest.raises(exception, match=match):
        call()


def test_case_count():
    # The suite the issue asks for counts every parametrized case across the
    # three bad-input files; this one holds the calibrators and privacy part.
    assert len(CASES) >= 90
