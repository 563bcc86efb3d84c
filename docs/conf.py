"""Sphinx configuration of the paralingam documentation.

Build with ``sphinx-build -W -b html docs build/html`` after installing the
package and its ``docs`` extra (``pip install ".[docs]"``). The API pages
import the installed package, so its compiled extensions must be built.
The performance tables and plots are rendered at build time from
``benchmarks/results/*.json`` by ``benchmarks/report.py``.
"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "benchmarks"))

import report  # noqa: E402  (benchmarks/report.py)

import paralingam  # noqa: E402

report.render(DOCS / "_generated")

project = "paralingam"
author = "the paralingam developers"
copyright = "the paralingam developers"
version = release = paralingam.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]

exclude_patterns = ["_build", "_generated/*.rst"]
templates_path = []

autosummary_generate = False
autodoc_typehints = "none"
numpydoc_show_class_members = False
# Validation of the docstrings' form is not part of the build (CI treats
# warnings as errors); numpydoc still renders every section.
numpydoc_validation_checks = set()
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"paralingam {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = []
