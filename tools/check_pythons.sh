#!/usr/bin/env bash
# Build gyreprof's sdist and wheel once, then, for every CPython the project declares
# (3.10 to 3.13), install the sdist into a clean virtual environment (so the C core is
# compiled by that interpreter from the sdist alone) and run the core's tests against
# the installed package, not the source tree.
#
#   bash tools/check_pythons.sh            # every declared version found here
#   bash tools/check_pythons.sh 3.12 3.13  # just these
#
# Interpreters are looked up as pythonX.Y on PATH, then among pyenv's installed versions. A declared
# version that is missing here is reported and makes the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.10 3.11 3.12 3.13)
CORE_TESTS=(tests/test_core_histogram.py tests/test_core_recorder.py tests/test_snapshot.py tests/test_profiler.py)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== building sdist and wheel (python -m build)"
python3 -m venv "$WORK/build-venv"
"$WORK/build-venv/bin/python" -m pip install -q --upgrade pip build
"$WORK/build-venv/bin/python" -m build --outdir "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; echo "FAIL: python -m build"; exit 1; }
sdist=$(ls "$WORK"/dist/gyreprof-*.tar.gz)
wheel=$(ls "$WORK"/dist/gyreprof-*.whl)
echo "   $(basename "$sdist")  $(basename "$wheel")"

# The tests run from a copy outside the source tree, so `import gyreprof` can only
# find the installed package.
mkdir -p "$WORK/t"
cp -r tests "$WORK/t/tests"
cp pyproject.toml "$WORK/t/"

find_python() {  # a working pythonX.Y: on PATH, else any pyenv-installed X.Y.*
  local v=$1 c
  for c in "$(command -v "python$v" || true)" "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$v".*/bin/"python$v"; do
    [ -n "$c" ] && [ -x "$c" ] && "$c" --version >/dev/null 2>&1 && { echo "$c"; return; }
  done
}

failed=()
check() {  # check LABEL PYTHON PACKAGE_FILE
  local label=$1 py=$2 pkg=$3 venv="$WORK/venv-$1"
  echo "== $label: $("$py" --version 2>&1), installing $(basename "$pkg")"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  if ! "$venv/bin/python" -m pip install -q "$pkg" pytest pytest-benchmark pytest-timeout hypothesis \
      >"$WORK/$label.install.log" 2>&1; then
    tail -30 "$WORK/$label.install.log"; failed+=("$label (install)"); return
  fi
  local where
  where=$(cd "$WORK/t" && "$venv/bin/python" -c 'import gyreprof, gyreprof._core.recorder as r; print(r.__file__)')
  case "$where" in "$venv"/*) ;; *) echo "imported from $where, not the venv"; failed+=("$label (import)"); return ;; esac
  if (cd "$WORK/t" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "${CORE_TESTS[@]}" 2>&1 | tail -3); then
    :
  else
    failed+=("$label (tests)")
  fi
}

for v in "${versions[@]}"; do
  py=$(find_python "$v")
  if [ -z "$py" ]; then
    echo "== $v: no python$v here"; failed+=("$v (missing)"); continue
  fi
  check "$v" "$py" "$sdist"
done
# The wheel, built for the interpreter that ran `build`, installs and imports too.
check wheel "$(command -v python3)" "$wheel"

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"; exit 1
fi
echo "OK: ${versions[*]} and the wheel"
