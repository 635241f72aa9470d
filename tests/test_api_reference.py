"""Every public name of every public module is in the API reference."""

import importlib
import re
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "api.rst"
MODULES = [
    "skfedcp",
    "skfedcp.calibrators",
    "skfedcp.scores",
    "skfedcp.metrics",
    "skfedcp.privacy",
    "skfedcp.two_students",
    "skfedcp.feature_selection",
    "skfedcp.federated",
    "skfedcp.datasets",
    "skfedcp.plotting",
    "skfedcp.exceptions",
]
# Names re-exported elsewhere (documented once) or constants, not API pages.
NOT_PAGES = {
    "__version__",
    "CALIBRATORS",
    "CLASSIFICATION_ONLY",
    "CLASSIFICATION_SCORES",
    "CQR_SCORES",
    "REGRESSION_SCORES",
    "ENTROPY_FRAC_BITS",
}


def _documented():
    """``{module: names}`` listed under each ``currentmodule`` of api.rst."""
    listed, module = {}, None
    for line in API.read_text().splitlines():
        match = re.match(r"\.\. currentmodule:: (\S+)", line)
        if match:
            module = match.group(1)
            continue
        name = re.match(r"   ([A-Za-z_][\w]*)$", line)
        if module and name:
            listed.setdefault(module, set()).add(name.group(1))
    return listed


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_is_documented(module_name):
    module = importlib.import_module(module_name)
    listed = set().union(*_documented().values())
    missing = sorted(set(module.__all__) - NOT_PAGES - listed)
    assert missing == [], f"{module_name}: not in docs/api.rst: {missing}"
