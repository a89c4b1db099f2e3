#!/usr/bin/env python3
"""Checks that each library folder includes only its own folder and the layers below it (docs/internals.md,
"Layering"):

  common/       common/ only
  formats/      common/ (graph.json, params.bin, packages, the kernel ABI: what the model compiler
                writes and the server reads)
  builder/      common/, formats/
  host_client/  common/, formats/ (a client talks to devices: no compiler)
  tuner/        common/, formats/, builder/, host_client/
  model/        common/, formats/, builder/, host_client/, tuner/
  cli/          all of the above (not tests/, bench/ or python/)
  python/       as cli/, less cli/ (the module binds the libraries, not the command line)
  rpc_server/   common/, formats/ (the server cross-builds for boards with few dependencies)
  tracker/      common/ only (it stores and forwards; it never reads a model)
  build_worker/ common/, formats/, builder/, rpc_server/ (the farm's build worker: the server's
                acceptor serving the builder's builds)

An include ("..." or <crosstune/...>) is resolved as the compiler would: a folder's public headers
(FOLDER/include/...) and the test helpers (tests/support/...), then beside the including file,
then from the repository root. Folders not listed (tests/, bench/, fuzz/, examples/) are not
checked. Prints each include that points up or sideways and exits 1; exits 0 when there is
none.

  scripts/check-layering.py [REPO_ROOT]
  scripts/check-layering.py --self-test   a tree with one bad include per rule must fail on each
"""
import os
import re
import sys
import tempfile

ALLOWED = {
    "common": {"common"},
    "formats": {"common", "formats"},
    "builder": {"common", "formats", "builder"},
    "host_client": {"common", "formats", "host_client"},
    "tuner": {"common", "formats", "builder", "host_client", "tuner"},
    "model": {"common", "formats", "builder", "host_client", "tuner", "model"},
    "cli": {"common", "formats", "builder", "host_client", "tuner", "model", "cli"},
    "python": {"common", "formats", "builder", "host_client", "tuner", "model", "python"},
    "rpc_server": {"common", "formats", "rpc_server"},
    "tracker": {"common", "tracker"},
    "build_worker": {"common", "formats", "builder", "rpc_server", "build_worker"},
}
SOURCES = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<(crosstune/[^>]+)>)', re.M)


def public_headers(root):
    """Every folder's public header by the name it is included as, and the test helpers'."""
    public = {}
    roots = [(os.path.join(root, f, "include"), f) for f in sorted(os.listdir(root))]
    roots.append((os.path.join(root, "tests", "support"), "tests"))
    for inc, folder in roots:
        for dirpath, _, files in os.walk(inc):
            for f in files:
                full = os.path.join(dirpath, f)
                public.setdefault(os.path.relpath(full, inc), folder)
    return public


def owner_of(root, public, dirpath, name):
    owner = public.get(name)
    if owner is not None:
        return owner
    for base in (dirpath, root):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(candidate):
            rel = os.path.relpath(candidate, root)
            return None if rel.startswith("..") else rel.split(os.sep, 1)[0]
    return None  # a system or third-party header


def check(root):
    """(files checked, ["path: includes ..."] for each include that points the wrong way)."""
    public = public_headers(root)
    bad = []
    checked = 0
    for folder, allowed in ALLOWED.items():
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, f)
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as text:
                    includes = INCLUDE.findall(text.read())
                for quoted, angled in includes:
                    name = quoted or angled
                    owner = owner_of(root, public, dirpath, name)
                    if owner is not None and owner not in allowed:
                        bad.append(f"{os.path.relpath(path, root)}: includes \"{name}\" of {owner}/"
                                   f" ({folder}/ may include {', '.join(sorted(allowed))})")
    return checked, bad


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    """One include that breaks each rule, each of which must be reported, and a tree without them
    that must pass."""
    headers = {
        "common": "common/include/crosstune/status.h",
        "formats": "formats/include/crosstune/graph.h",
        "builder": "builder/include/crosstune/builder/target.h",
        "host_client": "host_client/include/crosstune/client/session.h",
        "tuner": "tuner/include/crosstune/tuner/task.h",
        "model": "model/include/crosstune/model/graph.h",
        "cli": "cli/commands.h",
        "python": "python/src/bindings.h",
        "rpc_server": "rpc_server/include/crosstune/server/server.h",
        "tracker": "tracker/include/crosstune/tracker/scheduler.h",
        "build_worker": "build_worker/include/crosstune/build_worker/build_worker.h",
        "tests": "tests/support/crosstune/testing/ports.h",
    }
    name = {k: v.split("/include/", 1)[-1].replace("tests/support/", "") for k, v in headers.items()}
    failures = []
    with tempfile.TemporaryDirectory() as good, tempfile.TemporaryDirectory() as bad_root:
        for tree in (good, bad_root):
            for rel in headers.values():
                write(tree, rel, "#pragma once\n")
        expected = []
        for folder, allowed in ALLOWED.items():
            ok = "".join(f'#include "{name[f]}"\n' for f in sorted(allowed) if f != folder)
            write(good, f"{folder}/src/ok.cc", ok + "#include <vector>\n")
            for other in sorted(set(headers) - allowed):
                src = f"{folder}/src/uses_{other}.cc"
                style = f"<{name[other]}>" if name[other].startswith("crosstune/") else \
                    f'"{name[other]}"'
                write(bad_root, src, f"#include {style}\n")
                expected.append(f"{src}: includes \"{name[other]}\" of {other}/")
        _, found = check(good)
        failures += [f"a good include was refused: {line}" for line in found]
        _, found = check(bad_root)
        for e in expected:
            if not any(line.startswith(e) for line in found):
                failures.append(f"not reported: {e}")
        if len(found) != len(expected):
            failures.append(f"{len(found)} reports for {len(expected)} bad includes")
    for line in failures:
        print(f"check-layering self-test: {line}")
    if failures:
        return 1
    print(f"check-layering self-test: {len(expected)} bad includes reported, none in a good tree")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    checked, bad = check(root)
    for line in bad:
        print(f"check-layering: {line}")
    if bad:
        return 1
    print(f"check-layering: {checked} files, every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
