#!/usr/bin/env python3
"""Checks that the build's compile commands name the checkout's folder only where they must, so
that a fresh clone elsewhere (CI's) hits ccache (cmake/CrosstunePathDefinitions.cmake):
no -D holds a path of the checkout or the build tree, but in the files allowed below, and every
C/C++ compile maps __FILE__ to the checkout (-fmacro-prefix-map). Prints each offence; exit 1.

  scripts/check-build-paths.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import shlex
import sys

# Library files that keep a path definition of their own (small, compiled alone).
ALLOWED = ("builder/src/kernel_include_dir.cc", "tests/support/qemu_board.cc")
# nanobind's own library: its sources are the Python venv's, not the checkout's.
OUTSIDE = ("/nanobind-static.dir/",)


def main():
    build, source = (os.path.realpath(a) for a in sys.argv[1:3])
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    bad = []
    for c in commands:
        args = shlex.split(c["command"]) if "command" in c else c["arguments"]
        rel = os.path.relpath(c["file"], source)
        if not any(o in c["file"] for o in OUTSIDE) and not any(
                a.startswith("-fmacro-prefix-map=" + source) for a in args):
            bad.append(f"{rel}: no -fmacro-prefix-map={source}/=")
        if rel in ALLOWED:
            continue
        for a in args:
            if a.startswith("-D") and (source in a or build in a):
                bad.append(f"{rel}: {a}")
    for b in bad:
        print("check-build-paths: " + b)
    print(f"check-build-paths: {len(commands)} compiles, {len(bad)} naming the checkout")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
