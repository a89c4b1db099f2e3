#!/usr/bin/env bash
# `pip install .` as a user does it, then the example: a wheel built from the source tree (with
# the build requirements install-deps.sh put in the package's venv, so no download), installed
# into a fresh virtual environment that sees Debian's numpy, and the journey script run with it
# from a folder outside the source tree (with a model for its network part when one is given).
#   wheel_test.sh SOURCE_DIR VENV_PYTHON OUT_DIR [MODEL.onnx]
set -euo pipefail
src=$1
python=$2
out=$3
model=(${4:+--model "$4"})
rm -rf "$out"
mkdir -p "$out"
"$python" -m pip wheel --no-deps --no-build-isolation -w "$out/dist" "$src"
wheel=$(ls "$out"/dist/crosstune-*.whl)
echo "wheel_test: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
/usr/bin/python3 -m venv --system-site-packages "$out/venv"
"$out/venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
cd "$out"
"$out/venv/bin/python" -c "import crosstune, sys; print('wheel_test: crosstune', crosstune.__version__, 'from', crosstune.__file__)"
XDG_CACHE_HOME="$out/cache" "$out/venv/bin/python" "$src/examples/python/journey.py" --trials 4 --work "$out/journey" "${model[@]}"
echo "wheel_test: the example ran with the installed wheel"
