#!/bin/sh
# Check 1: SB3 PPO, DummyVecEnv / SubprocVecEnv, plain / sleepy train, under gyreprof run.
set -u
OUT=${OUT:-/tmp/gyreprof-validation}; mkdir -p "$OUT"
for vec in dummy subproc; do
  for mode in plain sleep; do
    flag=""; [ "$mode" = sleep ] && flag="--sleep"
    python -m gyreprof run --json "$OUT/sb3_${vec}_${mode}.json" -- \
      python validation/sb3_ppo.py --vec "$vec" $flag >"$OUT/sb3_${vec}_${mode}.out" 2>"$OUT/sb3_${vec}_${mode}.err"
    echo "sb3 $vec $mode rc=$?"
  done
done
