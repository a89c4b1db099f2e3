#!/usr/bin/env python3
"""scripts/check-doc-commands.py against the real crosstune: a fixture with one command that
parses (line 4) and one the CLI refuses (line 5: --repeat 0 is outside 1..10000) must fail
naming the second line only; the same fixture without the bad command passes.

    check_doc_commands_test.py CROSSTUNE_BINARY
"""

import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
CHECKER = HERE.parent.parent / "scripts" / "check-doc-commands.py"
FIXTURE = HERE / "data" / "commands.md"


def run(crosstune: str, path: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECKER), "--bin", f"crosstune={crosstune}",
                           str(path)], capture_output=True, text=True, timeout=60)


def main() -> int:
    crosstune = sys.argv[1]
    failures = []
    p = run(crosstune, FIXTURE)
    print(p.stdout, p.stderr, sep="")
    if p.returncode != 1:
        failures.append(f"exit status {p.returncode} on the fixture, 1 expected")
    if f"{FIXTURE}:5: crosstune bench" not in p.stdout or "--repeat" not in p.stdout:
        failures.append("the refused command (line 5) is not named with its error")
    if f"{FIXTURE}:4:" in p.stdout:
        failures.append("the command that parses (line 4) is reported")
    if "2 commands" not in p.stdout:
        failures.append("the checker did not find both commands")
    with tempfile.TemporaryDirectory() as tmp:
        good = pathlib.Path(tmp) / "good.md"
        text = FIXTURE.read_text().replace("--repeat 0", "--repeat 5")
        good.write_text(text + "\nSee [the fixture](missing-page.md).\n")
        p = run(crosstune, good)
        print(p.stdout, p.stderr, sep="")
        if "missing-page.md does not exist" not in p.stdout:
            failures.append("a link to a missing file is not reported")
        good.write_text(text + "\nSee [the top](#a-fixture-for-testsdocscheck_doc_commands_testpy).\n")
        p = run(crosstune, good)
        print(p.stdout, p.stderr, sep="")
        if p.returncode != 0:
            failures.append(f"exit status {p.returncode} with every command parsing, 0 expected")
    for f in failures:
        print(f"check_doc_commands_test: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
