#!/usr/bin/env python3
"""Checks the command lines and the relative links of Markdown files against the real programs.

Every line of a fenced code block that starts with one of crosstune's programs (``crosstune``,
``crosstune-server``, ``crosstune-tracker``, ``crosstune-build-worker``; a leading ``$ `` is
allowed, a trailing ``\\`` joins the next line; blocks marked ``text``, diagrams and output, are
left alone) is run with CROSSTUNE_PARSE_ONLY=1, which makes
the program parse it with its real parser and run nothing (common/include/crosstune/parse_only.h).
A line the program refuses is reported as FILE:LINE with the program's error. What follows a
shell operator (``&&``, ``|``, ``;``, ``>``) or a ``#`` comment is not part of the command.

Links: every relative link ``[text](path)`` outside code must name a file that exists, and a
``#anchor`` into a Markdown file must name one of its headings (Sphinx checks the pages under
docs/ itself; this covers README.md and anything else outside the site).

    scripts/check-doc-commands.py --build-dir build/default README.md docs/*.md
Exit status: 0 when everything passes, 1 when anything fails (each failure on its own line).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shlex
import subprocess
import sys

# The programs whose command lines are checked, and where a build tree keeps each.
PROGRAMS = {
    "crosstune": "cli/crosstune",
    "crosstune-server": "rpc_server/crosstune-server",
    "crosstune-tracker": "tracker/crosstune-tracker",
    "crosstune-build-worker": "build_worker/crosstune-build-worker",
}
OPERATORS = {"&&", "||", "|", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def code_lines(text: str, skip_text_blocks: bool = False):
    """Yields (line number, line) for every line inside a fenced code block (with
    skip_text_blocks, not those of a block marked `text`: diagrams and output)."""
    fence, skipping = None, False
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(2)
                skipping = skip_text_blocks and m.group(3).strip() == "text"
            continue
        if m and m.group(2).startswith(fence[0]) and len(m.group(2)) >= len(fence) \
                and not m.group(3).strip():
            fence = None
            continue
        if not skipping:
            yield number, line


def prose_lines(text: str):
    """Yields (line number, line) for every line outside fenced code blocks, inline code removed."""
    inside = {n for n, _ in code_lines(text)}
    fence_lines = {n for n, line in enumerate(text.splitlines(), 1) if FENCE.match(line)}
    for number, line in enumerate(text.splitlines(), 1):
        if number in inside or number in fence_lines:
            continue
        yield number, re.sub(r"`[^`]*`", "", line)


def commands(text: str):
    """Yields (line number, argv) for each command line of a program in PROGRAMS."""
    pending, start = "", 0
    for number, line in code_lines(text, skip_text_blocks=True):
        stripped = line.strip()
        if not pending:
            if stripped.startswith("$ "):
                stripped = stripped[2:].lstrip()
            if not stripped or stripped.split()[0] not in PROGRAMS:
                continue
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        yield start, split_command(pending + stripped)
        pending = ""
    if pending:
        yield start, split_command(pending)


def split_command(line: str) -> list[str]:
    """Splits a shell line into words, up to its first operator or comment."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&|;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = []
    for word in lexer:
        if word in OPERATORS or set(word) <= set("&|;<>"):
            break
        words.append(word)
    return words


def supports_parse_only(binary: str) -> bool:
    """True when the program says it is in argument-check mode (probed with --help, harmless
    either way): one built without the mode would run a documented command for real."""
    env = dict(os.environ, CROSSTUNE_PARSE_ONLY="1")
    try:
        p = subprocess.run([binary, "--help"], env=env, capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False
    return p.stderr.startswith("argument-check mode\n")


def check_command(argv: list[str], binaries: dict[str, str]) -> str | None:
    """Runs argv in argument-check mode; returns the program's error, or None when it parses."""
    env = dict(os.environ, CROSSTUNE_PARSE_ONLY="1")
    try:
        p = subprocess.run([binaries[argv[0]], *argv[1:]], env=env, capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "did not finish within 30 s in argument-check mode"
    if p.returncode == 0:
        return None
    message = (p.stderr.strip() or p.stdout.strip()).splitlines()
    return message[0] if message else f"exit status {p.returncode}"


def anchors_of(path: pathlib.Path) -> set[str]:
    """The anchors of a Markdown file's headings, as MyST and GitHub make them."""
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"[^\w\- ]", "", m.group(1).lower()).strip()
        found.add(title.replace(" ", "-"))
    for m in re.finditer(r"^\((\S+)\)=\s*$", path.read_text(encoding="utf-8"), re.M):
        found.add(m.group(1))  # MyST targets: (name)=
    return found


def check_links(path: pathlib.Path, text: str):
    """Yields (line number, message) for each relative link whose file or anchor is missing."""
    for number, line in prose_lines(text):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file) if file else path
            if not dest.exists():
                yield number, f"link to {target}: {file} does not exist"
            elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
                yield number, f"link to {target}: {dest.name} has no heading '{anchor}'"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=pathlib.Path, help="Markdown files to check")
    ap.add_argument("--build-dir", type=pathlib.Path, default=pathlib.Path("build/default"),
                    help="the build tree whose programs parse the commands")
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH",
                    help="the program to use for NAME (repeatable; overrides --build-dir)")
    ap.add_argument("--no-links", action="store_true", help="check the commands only")
    args = ap.parse_args()

    binaries = {name: str(args.build_dir / rel) for name, rel in PROGRAMS.items()}
    for item in args.bin:
        name, _, path = item.partition("=")
        if name not in PROGRAMS:
            ap.error(f"--bin {item}: not one of {', '.join(PROGRAMS)}")
        binaries[name] = path

    failures, checked = [], 0
    probed: dict[str, bool] = {}
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        for number, argv in commands(text):
            if not os.access(binaries[argv[0]], os.X_OK):
                failures.append(f"{path}:{number}: {argv[0]}: no program at {binaries[argv[0]]}")
                continue
            if argv[0] not in probed:
                probed[argv[0]] = supports_parse_only(binaries[argv[0]])
            if not probed[argv[0]]:
                failures.append(f"{path}:{number}: {argv[0]}: {binaries[argv[0]]} has no "
                                "argument-check mode (CROSSTUNE_PARSE_ONLY=1; built before it?): "
                                "not run")
                continue
            checked += 1
            error = check_command(argv, binaries)
            if error is not None:
                failures.append(f"{path}:{number}: {shlex.join(argv)}: {error}")
        if not args.no_links:
            for number, message in check_links(path, text):
                failures.append(f"{path}:{number}: {message}")
    for failure in failures:
        print(failure)
    print(f"check-doc-commands: {checked} commands in {len(args.files)} files, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
