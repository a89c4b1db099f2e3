#!/usr/bin/env python3
"""Checks the split between the main tree's tests and the asan tree's in scripts/test.sh's full run.

There the main tree leaves out every test executable whose cases the asan tree runs in full
(CROSSTUNE_SKIP_TESTS_RUN_UNDER_ASAN, tests/CMakeLists.txt); it builds and runs only the
executables listed in CROSSTUNE_TESTS_WITH_UNSANITIZED_CASES among them. A case that the asan test
preset leaves out by name (CMakePresets.json) in an executable not listed would run nowhere,
unless the tsan test preset runs it: a slow case that both sanitizer trees would run runs under
TSan only (the asan preset names it), and so needs no listing. Run in an asan tree after its build
(the discovered test lists are there):

  scripts/check-sanitizer-split.py --build-dir build/asan --presets CMakePresets.json \\
      --listed model_compile_test ... [--left-to-asan build/default/tests-left-to-asan.txt]

Prints each executable with a case left out but not listed, each listed one with no case left
out (the main tree would build and run it for nothing), and, given the main tree's list, each
executable it leaves to this tree that this tree lacks; exits 1 if any, 0 otherwise.

  scripts/check-sanitizer-split.py --build-dir build/asan --presets CMakePresets.json \
      --main-exclude build/default

prints instead a regular expression for `ctest -E` in the main tree: the tests both trees have
that the asan test preset runs (the listed executables' other cases, the checks of the docs and
the layering), so that each runs once in a full run; an empty line when there are none.
"""
import subprocess
import argparse
import glob
import json
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True, help="the asan tree, built")
    ap.add_argument("--presets", required=True, help="CMakePresets.json")
    ap.add_argument("--listed", nargs="*", default=None,
                    help="CROSSTUNE_TESTS_WITH_UNSANITIZED_CASES (checked when given)")
    ap.add_argument("--left-to-asan", metavar="FILE",
                    help="the main tree's tests-left-to-asan.txt: each executable named there "
                         "must be in this tree")
    ap.add_argument("--main-exclude", metavar="MAIN_BUILD_DIR",
                    help="print the ctest -E expression of the main tree's tests the asan run "
                         "also runs")
    args = ap.parse_args()
    if args.main_exclude:
        return print_main_exclude(args.build_dir, args.main_exclude)

    with open(args.presets, encoding="utf-8") as f:
        presets = json.load(f)
    asan = [p for p in presets.get("testPresets", []) if p.get("name") == "asan"]
    if not asan:
        print("check-sanitizer-split: no asan test preset in " + args.presets)
        return 1
    pattern = asan[0].get("filter", {}).get("exclude", {}).get("name", "")
    left_out = re.compile(pattern) if pattern else None
    # The cases the tsan test preset runs (by name) run there: not left out of every tree.
    tsan = [p for p in presets.get("testPresets", []) if p.get("name") == "tsan"]
    tsan_filter = tsan[0].get("filter", {}) if tsan else {}
    tsan_in = tsan_filter.get("include", {}).get("name", "")
    tsan_out = tsan_filter.get("exclude", {}).get("name", "")

    def under_tsan(case):
        return bool(tsan_in) and re.search(tsan_in, case) is not None and not (
            tsan_out and re.search(tsan_out, case))

    # gtest_discover_tests writes each executable's cases to <exe>[N]_tests.cmake.
    cases = {}
    files = glob.glob(os.path.join(args.build_dir, "tests", "**", "*_tests.cmake"), recursive=True)
    for path in files:
        exe = re.sub(r"\[\d+\]_tests\.cmake$", "", os.path.basename(path))
        with open(path, encoding="utf-8") as f:
            text = f.read()
        cases.setdefault(exe, []).extend(re.findall(r"add_test\(\s*\[=\[(.*?)\]=\]", text))
    if not cases:
        print("check-sanitizer-split: no discovered tests under " + args.build_dir + "/tests")
        return 1

    problems = []
    listed = set(args.listed or [])
    for exe in sorted(cases) if args.listed is not None else []:
        out = [c for c in cases[exe] if left_out and left_out.search(c) and not under_tsan(c)]
        if out and exe not in listed:
            problems.append(
                f"{exe}: {len(out)} case(s) left out of the asan run by name (first: {out[0]}), "
                "but the main tree skips it in a full run: add it to "
                "CROSSTUNE_TESTS_WITH_UNSANITIZED_CASES (tests/CMakeLists.txt) or have the "
                "tsan test preset run it")
        if not out and exe in listed:
            problems.append(
                f"{exe}: listed in CROSSTUNE_TESTS_WITH_UNSANITIZED_CASES, but the asan run "
                "leaves none of its cases out: take it off the list")
    for exe in sorted(listed - set(cases)) if args.listed is not None else []:
        problems.append(f"{exe}: listed in CROSSTUNE_TESTS_WITH_UNSANITIZED_CASES, but this "
                        "tree has no such test executable")
    if args.left_to_asan:
        with open(args.left_to_asan, encoding="utf-8") as f:
            left = [line.strip() for line in f if line.strip()]
        for exe in left:
            if exe not in cases:
                problems.append(f"{exe}: the main tree leaves it to the asan tree, which has no "
                                "discovered cases of it: they run nowhere")
    for p in problems:
        print("check-sanitizer-split: " + p)
    if not problems:
        print(f"check-sanitizer-split: {len(cases)} test executables here: ok")
    return 1 if problems else 0


def test_names(*ctest_args):
    """The names ctest would run with these arguments (from its JSON listing)."""
    out = subprocess.run(["ctest", "--show-only=json-v1", *ctest_args], check=True,
                         capture_output=True, text=True).stdout
    return {t["name"] for t in json.loads(out).get("tests", [])}


def print_main_exclude(asan_dir, main_dir):
    # The asan preset's filter applied by ctest itself; the preset names its tree's folder.
    under_asan = test_names("--preset", "asan")
    both = sorted(test_names("--test-dir", main_dir) & under_asan)
    print("^(" + "|".join(re.escape(n) for n in both) + ")$" if both else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
