#!/bin/sh
# Check 4: gyreprof doctor PID (no --log) on real processes. Prints state / exit code / evidence.
set -u
OUT=${OUT:-/tmp/gyreprof-validation}; mkdir -p "$OUT"
probe() {  # name, then the target's stdout destination
  name=$1; dest=$2; shift 2
  python validation/doctor_targets.py "$@" >"$dest" 2>"$OUT/doctor_$name.stderr" &
  pid=$!
  sleep "${WARM:-15}"   # imports + first rollouts
  python -m gyreprof doctor "$pid" --interval 5 --no-stacks --json >"$OUT/doctor_$name.json"
  rc=$?
  kill "$pid"; wait "$pid" 2>/dev/null
  echo "doctor $name ($*, stdout -> $dest): exit $rc"
  python -c "import json,sys; d=json.load(open(sys.argv[1])); print('  state:', d['state'], '| progress_source:', d.get('progress_source'), '| watched:', d.get('watched')); [print('  evidence:', e) for e in (d['evidence'] if isinstance(d['evidence'], list) else [d['evidence']])]" "$OUT/doctor_$name.json"
}
probe sb3_file "$OUT/sb3_train.log" sb3
probe sb3_null /dev/null sb3
probe spin_null /dev/null spin
probe refused_file "$OUT/refused.log" refused
probe poll_null /dev/null poll
