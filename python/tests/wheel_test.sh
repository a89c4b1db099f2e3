#!/usr/bin/env bash
# `pip wheel .` as a user runs it, then the wheel installed and used. A fresh virtual environment
# builds the wheel from the repository root with build isolation (pip's default: pyproject.toml's
# build requirements installed into a throwaway environment of pip's own), taking them from the
# wheelhouse scripts/install-deps.sh fills instead of PyPI (--no-index: no network). The wheel is
# installed into a second fresh virtual environment, which sees Debian's numpy, imported there,
# and the journey script run with it from a folder outside the source tree (with a model for its
# network part when one is given).
#   wheel_test.sh SOURCE_DIR WHEELHOUSE OUT_DIR [MODEL.onnx]
set -euo pipefail
src=$1
wheelhouse=$2
out=$3
model=(${4:+--model "$4"})
if ! compgen -G "$wheelhouse/*.whl" >/dev/null; then
  echo "wheel_test: error: $wheelhouse: no wheels; scripts/install-deps.sh python fills it" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
/usr/bin/python3 -m venv "$out/build-venv"
(cd "$src" && "$out/build-venv/bin/python" -m pip wheel --no-deps --no-index \
  --find-links "$wheelhouse" -w "$out/dist" .)
wheel=$(ls "$out"/dist/crosstune-*.whl)
echo "wheel_test: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
/usr/bin/python3 -m venv --system-site-packages "$out/venv"
"$out/venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
cd "$out"
"$out/venv/bin/python" -c "import crosstune, sys; print('wheel_test: crosstune', crosstune.__version__, 'from', crosstune.__file__)"
XDG_CACHE_HOME="$out/cache" "$out/venv/bin/python" "$src/examples/python/journey.py" --trials 4 --work "$out/journey" "${model[@]}"
echo "wheel_test: the example ran with the installed wheel"
