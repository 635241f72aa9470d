"""Sphinx configuration; builds offline (no intersphinx by default)."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
import skfedcp

project = "skfedcp"
author = "The skfedcp developers"
copyright = "2026, the skfedcp developers"
version = release = skfedcp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
numpydoc_show_class_members = False
# The numpydoc sections document every type; inline hints (for type checkers)
# would repeat them in the signatures, with numpy's ArrayLike fully expanded.
autodoc_typehints = "none"
templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb"]
html_theme = "pydata_sphinx_theme"
html_static_path = []

sphinx_gallery_conf = {
    "examples_dirs": ["../examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"flower",
    # Quickstart first (the default order is alphabetical).
    "subsection_order": [
        "../examples/quickstart",
        "../examples/advanced",
        "../examples/papers",
    ],
    "download_all_examples": False,
}
