"""Runs a Jupyter notebook's code cells in order in one namespace, as a kernel would, after
nbformat has validated the file; fails on the first cell that raises."""

from __future__ import annotations

import sys
import tempfile

import nbformat


def main(path: str) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    namespace: dict = {"__name__": "__main__"}
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    # What the notebook keeps in temporary folders goes into one that is removed afterwards.
    with tempfile.TemporaryDirectory(prefix="crosstune-run-notebook-") as tmp:
        tempfile.tempdir = tmp
        try:
            for i, cell in enumerate(cells, 1):
                print(f"--- cell {i}/{len(cells)}", flush=True)
                exec(compile(cell.source, f"{path}[cell {i}]", "exec"), namespace)
        finally:
            tempfile.tempdir = None
    print(f"run_notebook: {len(cells)} code cells ran", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
