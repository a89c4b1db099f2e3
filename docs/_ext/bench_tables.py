"""The `bench-tables` directive: the tables of every recorded benchmark run under
docs/benchmarks/data, rendered by scripts/bench-tables.py (so the page and the script never
disagree), with the benches that have no recorded run named; with a bench's name as its argument,
that bench's runs alone (a page quoting one figure)."""

import importlib.util
import pathlib

from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from docutils import nodes

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_tables_script",
                                               ROOT / "scripts" / "bench-tables.py")
_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_script)
DATA = ROOT / "docs" / "benchmarks" / "data"


class BenchTables(Directive):
    """```{bench-tables}``` renders every bench's runs; ```{bench-tables} NAME``` one bench's."""
    has_content = False
    optional_arguments = 1

    def run(self):
        try:
            text = _script.render(DATA, self.arguments[0] if self.arguments else None)
        except _script.DataError as e:
            raise self.error(str(e))
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), source=str(DATA)),
                                self.content_offset, container)
        return container.children


def _always_outdated(app, env, added, changed, removed):
    """The pages with tables are read again on every build: a recorded run added, changed or
    removed changes them, and Sphinx tracks no folder's contents."""
    pages = []
    for docname in env.found_docs - set(removed):
        if "{bench-tables}" in pathlib.Path(env.doc2path(docname)).read_text(encoding="utf-8"):
            pages.append(docname)
    return pages


def setup(app):
    app.add_directive("bench-tables", BenchTables)
    app.connect("env-get-outdated", _always_outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
