#!/bin/sh
# Check 5: SB3 DummyVecEnv script 3x bare and 3x under `gyreprof run`, interleaved.
# Wall and CPU (user+sys of the whole process tree, from /usr/bin/time -f) per run.
set -u
OUT=${OUT:-/tmp/gyreprof-validation}; mkdir -p "$OUT"
: >"$OUT/overhead.tsv"
for i in 1 2 3; do
  for mode in bare run; do
    if [ "$mode" = bare ]; then
      set -- python validation/sb3_ppo.py --vec dummy
    else
      set -- python -m gyreprof run --json "$OUT/overhead_$i.json" -- python validation/sb3_ppo.py --vec dummy
    fi
    python - "$mode" "$i" "$OUT/overhead.tsv" "$@" <<'PY'
import os, subprocess, sys, time
mode, i, tsv, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
load = os.getloadavg()[0]
t0 = time.perf_counter(); c0 = os.times()
subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
wall = time.perf_counter() - t0; c1 = os.times()
cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
line = f"{mode}\t{i}\t{wall:.2f}\t{cpu:.2f}\t{load:.2f}"
print(line); open(tsv, "a").write(line + "\n")
PY
  done
done
python - "$OUT/overhead.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
for k, idx in (("wall", 2), ("cpu", 3)):
    b = [float(r[idx]) for r in rows if r[0] == "bare"]; r_ = [float(r[idx]) for r in rows if r[0] == "run"]
    print(f"{k}: bare median {statistics.median(b):.2f} s {b}, run median {statistics.median(r_):.2f} s {r_}, ratio {statistics.median(r_)/statistics.median(b):.3f}")
PY
