"""Sphinx configuration of the fastfc documentation (``sphinx-build -W -b html docs docs/_build/html``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# document the checkout's fastfc (its compiled kernels built in place or installed)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

import fastfc  # noqa: E402

project = "fastfc"
author = "fastfc developers"
copyright = "fastfc developers, BSD-3-Clause"
release = fastfc.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "fastfc_results",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "examples/README.rst", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.codeobj.json"]
source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
nitpicky = False
# keep "--option" and quotes as typed (commands and results files are shown verbatim)
smartquotes = False

# autodoc / numpydoc
autosummary_generate = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# sphinx-gallery: docs/examples/plot_*.py are run at build time on small data
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": "True",
    "within_subsection_order": "sphinx_gallery.sorting.FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "abort_on_example_error": True,
}

html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {
    "description": "fast federated clustering, one shot by default",
    "fixed_sidebar": True,
}
html_show_sourcelink = False


def _skip_foreign(app, what, name, obj, skip, options):
    """Document fastfc's own objects only (not scikit-learn's generated ``set_*_request`` or re-exports)."""
    module = getattr(obj, "__module__", None)
    if callable(obj) and isinstance(module, str) and not module.startswith("fastfc"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign)
