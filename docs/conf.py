# Sphinx configuration of crosstune's documentation: MyST Markdown pages, the Python API read
# statically from the package's sources and the native module's stubs (sphinx-autoapi: nothing is
# imported, so no wheel is needed), and benchmark tables made from recorded bench JSON
# (_ext/bench_tables.py). Offline: no intersphinx, nothing fetched at build time.
#
#   sphinx-build -W --keep-going -b html docs build/docs      (scripts/test.sh's docs phase)
#
# The native module's stubs (_core.pyi) come from nanobind's stubgen at build time; they are read
# from CROSSTUNE_PYTHON_STUBS, else from build/default/python/crosstune/_core.pyi.
import os
import pathlib
import re
import shutil
import sys

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "crosstune"
author = "the crosstune authors"
copyright = "the crosstune authors"
_version = re.search(r'#define CROSSTUNE_VERSION_STRING "([0-9.]+)"',
                     (ROOT / "common/include/crosstune/version.h").read_text())
release = version = _version.group(1) if _version else "unknown"

extensions = ["myst_parser", "autoapi.extension", "bench_tables"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}  # autoapi writes .rst
root_doc = "index"
exclude_patterns = ["benchmarks/data", "_ext"]
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]
html_theme = "alabaster"
html_title = f"crosstune {release}"
html_static_path = []
# Every cross-reference must resolve (MyST reports a missing page or anchor as a warning, which
# -W makes an error).
nitpicky = False

# The Python package, staged with the native module's stubs beside it, as autoapi reads it.
# (Sphinx runs this file in docs/: a relative path is taken from the repository root.)
_stubs = ROOT / os.environ.get("CROSSTUNE_PYTHON_STUBS",
                               "build/default/python/crosstune/_core.pyi")
_staged = ROOT / os.environ.get("CROSSTUNE_DOCS_STAGING", "build/docs-staging") / "crosstune"
if _staged.exists():
    shutil.rmtree(_staged)
_staged.mkdir(parents=True)
for _py in (ROOT / "python/crosstune").glob("*.py"):
    shutil.copy(_py, _staged / _py.name)
if _stubs.is_file():
    shutil.copy(_stubs, _staged / "_core.pyi")
else:
    # Fails a -W build: the API pages would lack every class the native module defines.
    print(f"conf.py: WARNING: no stubs of crosstune._core at {_stubs}: build the Python package "
          "first (ninja -C build/default crosstune_python_core) or set CROSSTUNE_PYTHON_STUBS",
          file=sys.stderr)
    _missing_stubs = True

autoapi_type = "python"
autoapi_dirs = [str(_staged)]
autoapi_root = "python-api"
autoapi_file_patterns = ["*.pyi", "*.py"]
autoapi_options = ["members", "undoc-members", "show-inheritance", "imported-members",
                   "private-members"]
autoapi_add_toctree_entry = False
autoapi_keep_files = False
autoapi_member_order = "groupwise"
autoapi_python_class_content = "both"


def _skip_private(app, what, name, obj, skip, options):
    """Private names stay out, but for the native module crosstune._core (its classes are the
    package's RemoteTensor, TimeResult, ...); the private modules' public names appear in the
    package's page, where __init__.py imports them."""
    last = name.rsplit(".", 1)[-1]
    if name == "crosstune._core":
        return False
    if last.startswith("_") and not (last.startswith("__") and last.endswith("__")):
        return True
    if last.startswith("__") and last not in ("__init__", "__call__", "__getitem__"):
        return True
    return skip


def setup(app):
    app.connect("autoapi-skip-member", _skip_private)
    if globals().get("_missing_stubs"):
        from sphinx.util import logging
        logging.getLogger(__name__).warning(
            "no stubs of crosstune._core (%s): the Python API pages would be incomplete", _stubs)
