"""The step the TVM tests that import TVM themselves share: run again under the TVM virtual
environment's python (CROSSTUNE_TVM_PYTHON, which scripts/install-deps.sh makes), or say the test
is skipped (exit 77) where there is none."""
import os
import subprocess
import sys

SKIP = 77
FLAG = "--in-tvm-python"


def rerun_in_tvm_python(script):
    """None when this process is already the TVM python's (FLAG in its arguments); else the exit
    status of `script` run again there with the same arguments and FLAG, or SKIP."""
    if FLAG in sys.argv:
        return None
    python = os.environ.get("CROSSTUNE_TVM_PYTHON", "/opt/crosstune/tvm-venv/bin/python")
    if not os.access(python, os.X_OK):
        print(f"skipped: no TVM python at {python} (scripts/install-deps.sh makes it)")
        return SKIP
    return subprocess.call([python, script, *sys.argv[1:], FLAG])
