#!/usr/bin/env python3
"""Where a build's time went, from ninja's log: the slowest objects and the time per folder.

  scripts/build-times.py build/default            the last build of each output in that tree
  scripts/build-times.py build/default --top 40   more objects
  scripts/build-times.py build/default --json     the same as JSON

Ninja logs each output's start and end (milliseconds since the build began); the time of an
object is its compile's wall time. Only a cold build says what compiling costs: a ccache hit
takes milliseconds, and with -jN each compile shares the cores with N-1 others. For the cost of
the sources, build from scratch with one job and no cache:

  CCACHE_DISABLE=1 ninja -C build/cold -j1 TARGET...

and read that tree's log. Headers and template instantiations inside one object are another
question: compile it with clang's -ftime-trace (or GCC's -ftime-report).
"""

import argparse
import collections
import json
import pathlib
import sys


def last_build(log: pathlib.Path) -> dict[str, float]:
    """Seconds per output, from each output's last entry in the log."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or not lines[0].startswith("# ninja log v"):
        raise SystemExit(f"build-times: {log}: not a ninja log")
    seconds = {}
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) != 5:
            continue
        start, end, output = int(fields[0]), int(fields[1]), fields[3]
        seconds[output] = (end - start) / 1000.0
    return seconds


def folder_of(output: str) -> str:
    """The source folder an object belongs to: tests/tuner for
    tests/tuner/CMakeFiles/x.dir/a.cc.o, cli for cli/CMakeFiles/..."""
    parts = output.split("/")
    if "CMakeFiles" in parts:
        parts = parts[: parts.index("CMakeFiles")]
    else:
        parts = parts[:-1]
    return "/".join(parts) or "."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", type=pathlib.Path)
    ap.add_argument("--top", type=int, default=20, help="how many of the slowest objects")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args()

    seconds = last_build(args.build_dir / ".ninja_log")
    objects = {k: v for k, v in seconds.items() if k.endswith(".o")}
    folders = collections.defaultdict(lambda: [0.0, 0])
    for output, s in objects.items():
        f = folders[folder_of(output)]
        f[0] += s
        f[1] += 1
    slowest = sorted(objects.items(), key=lambda kv: -kv[1])[: args.top]
    by_folder = sorted(folders.items(), key=lambda kv: -kv[1][0])
    total = sum(objects.values())
    if args.json:
        json.dump({"objects": len(objects), "compile_s": round(total, 1),
                   "slowest": [{"object": k, "s": round(v, 2)} for k, v in slowest],
                   "folders": [{"folder": k, "s": round(v[0], 1), "objects": v[1]}
                               for k, v in by_folder]}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{len(objects)} objects, {total:.0f} s of compiles in all")
    print(f"\nthe {len(slowest)} slowest:")
    for output, s in slowest:
        print(f"  {s:7.1f} s  {output}")
    print("\nby folder:")
    for folder, (s, n) in by_folder:
        print(f"  {s:7.0f} s  {n:4d} objects  {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
