"""Importing skfedcp.plotting does not import matplotlib."""

import subprocess
import sys


def test_matplotlib_is_imported_only_when_drawing():
    code = (
        "import sys, skfedcp, skfedcp.plotting, skfedcp.__main__; "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
