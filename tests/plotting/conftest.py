"""Displays draw with the non-interactive Agg backend; figures are closed."""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


@pytest.fixture
def hide_matplotlib(monkeypatch):
    """Make ``import matplotlib`` fail, as when the extra is not installed."""
    import sys

    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.setitem(sys.modules, name, None)
