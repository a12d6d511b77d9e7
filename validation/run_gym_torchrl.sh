#!/bin/sh
# Checks 2 and 3: TorchRL collector (no sleep / 20 ms sleep in the body) and gymnasium vector envs.
set -u
OUT=${OUT:-/tmp/gyreprof-validation}; mkdir -p "$OUT"
# body: no sleep; a fixed 20 ms sleep; a sleep of 3x the wait before it (trainer-bound)
for opt in "--sleep-ms 0" "--sleep-ms 20" "--sleep-factor 3"; do
  tag=$(echo "$opt" | tr -d ' -')
  python -m gyreprof run --json "$OUT/torchrl_$tag.json" -- \
    python validation/torchrl_collector.py $opt >"$OUT/torchrl_$tag.out" 2>"$OUT/torchrl_$tag.err"
  echo "torchrl $opt rc=$?"
done
for vec in async sync; do
  python -m gyreprof run --json "$OUT/gym_$vec.json" -- \
    python validation/gym_vector.py --vec $vec >"$OUT/gym_$vec.out" 2>"$OUT/gym_$vec.err"
  echo "gym $vec rc=$?"
done
