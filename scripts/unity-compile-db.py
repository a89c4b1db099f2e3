#!/usr/bin/env python3
"""Writes a compile database that names every source a unity build compiles, for clang-tidy.

The build batches sources into unity files (CMAKE_UNITY_BUILD): compile_commands.json then lists
`.../Unity/unity_N_cxx.cxx`, not the sources each includes, and clang-tidy finds no command for a
source of a batch. This copies the database and adds, for each source a unity file includes, that
unity file's command with the source in its place (the same flags: its target's).

  unity-compile-db.py build/default /tmp/tidy-db      # writes /tmp/tidy-db/compile_commands.json

Uses only the standard library.
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: unity-compile-db.py BUILD_DIR OUT_DIR")
    build, out = sys.argv[1:]
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        db = json.load(f)
    listed = {e["file"] for e in db}
    extra = []
    for e in db:
        if "/Unity/unity_" not in e["file"] or not os.path.exists(e["file"]):
            continue
        with open(e["file"], encoding="utf-8") as f:
            sources = INCLUDE.findall(f.read())
        for src in sources:
            if src in listed:
                continue
            listed.add(src)
            command = e["command"].replace(e["file"], src)
            # The batch's object file is no output of this command.
            command = re.sub(r" -o \S+", " -o /dev/null", command)
            extra.append({"directory": e["directory"], "command": command, "file": src})
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compile_commands.json"), "w", encoding="utf-8") as f:
        json.dump(db + extra, f, indent=0)
    print(f"unity-compile-db: {len(extra)} sources of unity batches added to {len(db)} entries")


if __name__ == "__main__":
    main()
