#!/usr/bin/env bash
# Build the C core with AddressSanitizer + UBSan in a scratch copy of the sources and run
# the core's tests against it (the recorder, histograms, snapshots, the body scanner,
# the env-call guard and its Binding; the training timeline's and the request log's
# tests, Python since issue 33, drive the recorder's *_at methods and its spans).
# The optimised build in the tree (or the installed package) is left alone. Needs Cython
# and a C compiler (both in the test extras / the build requirements).
#
#   bash tools/sanitize_core.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r src setup.py pyproject.toml README.md "$WORK/"
find "$WORK/src" \( -name '*.so' -o -name '*.c' \) -delete
(cd "$WORK" && GYREPROF_SANITIZE=1 python setup.py build_ext --inplace >"$WORK/build.log" 2>&1) \
  || { tail -40 "$WORK/build.log"; echo "sanitised build failed"; exit 1; }
# The sanitised extension needs the sanitiser runtimes loaded first: every Python that
# imports it runs with this environment.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export PYTHONPATH="$WORK/src"
where=$(python -c 'import gyreprof._core.recorder as r; print(r.__file__)')
case "$where" in "$WORK"/*) echo "sanitised core: $where" ;; *) echo "imported $where, not the sanitised build"; exit 1 ;; esac
python -m pytest -q -p no:cacheprovider -p no:randomly \
    tests/test_core_histogram.py tests/test_core_recorder.py tests/test_snapshot.py tests/test_profiler.py \
    tests/test_body_scan.py tests/test_timeline.py tests/test_wrapper_cost.py tests/test_request_log.py "$@"
