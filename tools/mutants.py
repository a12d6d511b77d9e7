#!/usr/bin/env python3
"""A mutation check the project owns: do the tests fail when one line is wrong?

Each mutant in ``MUTANTS`` changes one snippet of the source (found by its exact
text, so line numbers can move) and names the test files that must catch it.
For every mutant this script:

1. copies ``src/``, ``tests/``, ``setup.py`` and ``pyproject.toml`` to a fresh
   temporary folder (never ``.git`` or build folders);
2. replaces the snippet; a snippet that is not found exactly once makes the
   mutant STALE (the code moved: update its row of the table);
3. rebuilds the compiled core in that copy only when a ``.pyx``/``.pxd``
   changed; the build then compiles only the changed extension, the others are
   the prebuilt copies;
4. runs the mutant's tests (``pytest -x -q``) with ``PYTHONPATH`` pointing at
   the copy. A failing run is KILLED, a passing one SURVIVED.

It prints one line per mutant and the kill rate, and exits non-zero when the
kill rate is below ``--threshold`` (default 0.95), any mutant is stale, or the
tests fail on the unmutated copy (then no kill means anything).

    python tools/mutants.py                 # all mutants, 2 at a time
    python tools/mutants.py --list          # the table
    python tools/mutants.py --only merge-totals codec-zigzag-sign
    python tools/mutants.py --jobs 4 --threshold 1.0
    python tools/mutants.py --changed origin/main --sample 6 --seed 7 --budget-s 300

For CI (``.ci/run``) a run that fits its time: ``--changed BASE`` takes the rows
whose source file or test files differ from commit BASE (committed or not),
``--sample N --seed S`` adds N other rows chosen by the seed (the same rows for
the same seed and table), and ``--budget-s`` starts no mutant after that many
seconds (those are reported SKIPPED and not counted).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("src", "tests", "setup.py", "pyproject.toml")
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info", "*.html")
# -m "": every test of the named files, also those the default run leaves out (slow, ray)
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "--hypothesis-seed=0", "-m", "")
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace ``original`` (exact text, found once) in ``path``."""

    id: str
    path: str  # relative to the repository root
    original: str
    replacement: str
    tests: tuple[str, ...]  # pytest arguments: test files or node ids

    @property
    def compiled(self) -> bool:
        return self.path.endswith((".pyx", ".pxd"))


_CORE_DIR = "src/gyreprof/_core"
_REC = f"{_CORE_DIR}/recorder.pyx"
_HDR = f"{_CORE_DIR}/hdr.pxd"
_HIST = f"{_CORE_DIR}/histogram.pyx"
_CODEC = f"{_CORE_DIR}/codec.pyx"
_SNAP = "src/gyreprof/model/snapshot/algebra.py"  # merge and interval
_SNAP_REC = "src/gyreprof/model/snapshot/records.py"
_SNAP_MODEL = "src/gyreprof/model/snapshot/model.py"
_SNAP_BUILD = "src/gyreprof/model/snapshot/build.py"
_WINDOW = "src/gyreprof/model/window.py"
_HISTPY = "src/gyreprof/model/histogram.py"
_COUNT = "src/gyreprof/_support/sample_count.py"
_WAIT = "src/gyreprof/analysis/wait.py"
_VERDICT = "src/gyreprof/analysis/verdict.py"
_RULE = "src/gyreprof/analysis/sweep/rule.py"
_DECIDE = "src/gyreprof/analysis/sweep/decide.py"
_DOCTOR_RULES = "src/gyreprof/diagnostics/_doctor_rules.py"
_DOCTOR_EVIDENCE = "src/gyreprof/diagnostics/_doctor_evidence.py"
_STARTUP = "src/gyreprof/analysis/startup.py"
_TL = "src/gyreprof/integrations/_auto/timeline.py"
_RL = "src/gyreprof/integrations/_auto/rollout_log.py"
_PS = "src/gyreprof/integrations/http/_common.py"
_HTTPX = "src/gyreprof/integrations/http/httpx.py"
_GATE = "src/gyreprof/integrations/http/urllib.py"

_T_REC = ("tests/test_core_recorder.py",)
_T_HIST = ("tests/test_core_histogram.py",)
_T_MERGE = ("tests/test_merge_sums.py",)
_T_WIN = ("tests/test_window_percentiles.py",)
_T_SNAP = ("tests/test_snapshot_algebra.py",)
_T_SHAPE = ("tests/test_decision_rules.py",)
_T_STARTUP = ("tests/test_startup.py",)
_T_TL = ("tests/test_timeline.py",)
_T_RL = ("tests/test_request_log.py",)
_T_GATE = ("tests/test_http_passthrough.py",)
_T_STREAMS = ("tests/test_http_streams.py",)
_SM = "src/gyreprof/analysis/server_metrics.py"
_T_SM = ("tests/test_rollouts_server.py",)
_RC = "src/gyreprof/analysis/rollout_cause.py"
_T_RC = "tests/test_rollout_cause.py"

# fmt: off
MUTANTS: tuple[Mutant, ...] = (
    # -- recorder (.pyx): steady-state extremes and sums, warm-up, window closing
    Mutant("rec-steady-min-kept", _REC,
           "if (__builtin_expect(d < st[GYRE_STAT_MIN], 0))", "if (__builtin_expect(d < 0, 0))",
           _T_REC),
    Mutant("rec-steady-max-kept", _REC,
           "if (__builtin_expect(d > st[GYRE_STAT_MAX], 0))", "if (__builtin_expect(d < 0, 0))",
           _T_REC),
    Mutant("rec-steady-sum-set", _REC,
           "__builtin_add_overflow(st[GYRE_STAT_SUM], d, &st[GYRE_STAT_SUM])",
           "__builtin_add_overflow(0, d, &st[GYRE_STAT_SUM])", _T_REC),
    # -- the fold: events reach the histograms from the ring, in batches and at steps
    Mutant("fold-index-off-by-one", _REC,
           "((K) - ((int64_t)(c) << (shm)) + ((v) >> ((B) - (c))))",
           "((K) - ((int64_t)(c) << (shm)) + ((v) >> ((B) - (c))) + 1)",
           ("tests/test_core_fold.py",)),
    Mutant("fold-not-before-window-close", _REC,
           "            self._fold(s[H_RING_HEAD])\n            self._close_window(now)",
           "            self._close_window(now)", ("tests/test_core_fold.py",)),
    Mutant("fold-not-before-warmup-end", _REC,
           "            self._fold(s[H_RING_HEAD])\n            s[H_WARMUP_STEPS] += 1",
           "            s[H_WARMUP_STEPS] += 1", ("tests/test_core_fold.py",)),
    Mutant("fold-form-not-counted", _REC,
           "                    s[GYRE_H_N_TIMER] += 1;\n",
           "\n", ("tests/test_core_fold.py",)),
    Mutant("fold-event-twice", _REC,
           "        self.folded = upto\n        self.fold_at = upto + self.batch",
           "        self.fold_at = upto + self.batch", ("tests/test_core_fold.py",)),
    Mutant("rec-warm-count-set", _REC,
           "st[WARM_COUNT] += 1", "st[WARM_COUNT] = 1", _T_REC),
    Mutant("rec-warmup-ends-late", _REC,
           "s[H_WARMUP_STEPS] >= self.warmup_steps", "s[H_WARMUP_STEPS] > self.warmup_steps",
           _T_REC),
    Mutant("rec-window-closes-late", _REC,
           "s[H_WIN_STEPS] >= self.window_steps", "s[H_WIN_STEPS] > self.window_steps", _T_REC),
    # -- rolling windows, closed by the recorder (.pyx)
    Mutant("win-p99-is-p999", _REC,
           "qs[2] = 99.0", "qs[2] = 99.9", _T_WIN),
    Mutant("win-rank-strict", _REC,
           "cum >= ranks[k]", "cum > ranks[k]", _T_WIN),
    Mutant("win-max-kept", _REC,
           "if (__builtin_expect(d > wc[GYRE_WCUR_MAX], 0))", "if (__builtin_expect(d >= 0, 0))",
           _T_WIN),
    Mutant("win-count-is-steps", _REC,
           "wf[WIN_COUNT] = total", "wf[WIN_COUNT] = s[H_WIN_STEPS]",
           _T_WIN + ("tests/test_window_rows.py",)),
    # -- the one percentile rule (hdr.pxd): histograms, windows and reports share it
    Mutant("pct-rank-floor", _HDR,  # issue 15: a window's p99 of 100k..1M said 901,119
           "rank += 1", "rank += 0", _T_HIST + _T_WIN),
    Mutant("pct-clamp-max-inverted", _HDR,
           "if vmax >= 0 and value > vmax:", "if vmax >= 0 and value < vmax:", _T_HIST + _T_WIN),
    Mutant("pct-top-rank-not-exact", _HDR,
           "if rank >= total and vmax >= 0:", "if rank > total and vmax >= 0:", _T_HIST),
    Mutant("pct-bucket-low-not-midpoint", _HDR,
           "hdr_lowest_equivalent(L, index) + (hdr_bucket_width(L, index) - 1) // 2",
           "hdr_lowest_equivalent(L, index)", _T_HIST),
    # -- histogram (.pyx)
    Mutant("hist-min-kept", _HIST,
           "if self.min < 0 or v < self.min:", "if self.min < 0:", _T_HIST),
    Mutant("hist-sum-ignores-count", _HIST,
           "self.sum += <double>v * <double>n", "self.sum += <double>v", _T_HIST),
    Mutant("hist-add-min-inverted", _HIST,
           "(self.min < 0 or other.min < self.min)", "(self.min < 0 or other.min > self.min)",
           _T_HIST),
    Mutant("hist-walk-one-bucket-early", _HIST,
           "cum + counts[i] < rank", "cum + counts[i] <= rank", _T_HIST),
    # -- codec (.pyx)
    Mutant("codec-zigzag-sign", _CODEC,  # issue 15: caught only by an error-message test
           "return <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))",
           "return <int64_t>(u >> 1) ^ (<int64_t>(u & 1))", _T_HIST),
    Mutant("codec-run-short", _CODEC,
           "pos = _put(out, pos, -(<int64_t>(j - i)))",
           "pos = _put(out, pos, -(<int64_t>(j - i - 1)))", _T_HIST),
    Mutant("codec-lone-zero", _CODEC,
           "pos = _put(out, pos, 0)", "pos = _put(out, pos, 1)", _T_HIST),
    Mutant("codec-top-bucket-dropped", _CODEC,
           "n = counts.shape[0] if length < 0", "n = counts.shape[0] - 1 if length < 0",
           _T_HIST),
    Mutant("codec-ninth-byte-7bit", _CODEC,
           "u |= (<uint64_t>data[pos]) << 56", "u |= (<uint64_t>(data[pos] & 0x7F)) << 56",
           _T_HIST),
    # -- merge (snapshot/algebra.py; the wall span: snapshot/records.py)
    Mutant("merge-totals", _SNAP,  # issue 15: 5 + 7 steps merged to 7
           "totals[k] += getattr(s.totals, k)", "totals[k] = getattr(s.totals, k)", _T_MERGE),
    Mutant("merge-reordered-drops-step-row", _SNAP,  # issue 15: step buckets hold half
           "else:\n            for src_row, dst in enumerate(rows):",
           "else:\n            for src_row, dst in enumerate(rows[:-1]):", _T_MERGE),
    Mutant("merge-rows-by-position", _SNAP,
           "if rows == list(range(nh)):", "if len(rows) == nh:", _T_MERGE),
    Mutant("merge-sum-set", _SNAP,
           "acc[rows[src_row]] = None if have is None or total is None else have + total",
           "acc[rows[src_row]] = total", _T_MERGE),
    Mutant("merge-min-inverted", _SNAP,
           "smin < stat[dst, 2]", "smin > stat[dst, 2]", _T_MERGE),
    Mutant("merge-max-inverted", _SNAP,
           "if smax > stat[dst, 3]:", "if smax < stat[dst, 3]:", _T_MERGE),
    Mutant("merge-warm-count-set", _SNAP,
           "_sat_add(warm[dst, 0], s.warm[src_row, 0])", "_sat_add(0, s.warm[src_row, 0])",
           _T_MERGE),
    Mutant("merge-warm-max-min", _SNAP,
           "warm[dst, 2] = max(warm[dst, 2], s.warm[src_row, 2])",
           "warm[dst, 2] = min(warm[dst, 2], s.warm[src_row, 2])", _T_MERGE),
    Mutant("merge-counters-set", _SNAP,
           "counters[k] = counters.get(k, 0) + v", "counters[k] = v", _T_MERGE),
    Mutant("merge-first-fastest", _SNAP,
           "f > first[dst]", "f < first[dst]", _T_MERGE),
    # an encoded read's buckets, decoded straight into a merge's sums (snapshot/binary.py)
    Mutant("encoded-buckets-unchecked", "src/gyreprof/model/snapshot/binary.py",
           "got = decode_counts_into(data, length, scratch)\n"
           "            _check_row(h, got, record, lo)",
           "got = decode_counts_into(data, length, scratch)",
           ("tests/test_snapshot_decode_checks.py",)),
    Mutant("encoded-scratch-not-cleared", "src/gyreprof/model/snapshot/binary.py",
           "                scratch[span] = 0", "                pass",
           ("tests/test_snapshot_decode_checks.py",)),
    Mutant("merge-time-adds-seconds", _SNAP_REC,  # parallel sources' seconds counted twice
           "return max(longest, hi - lo)", "return sum(b - a for _, a, b in spans)", _T_SNAP),
    # -- interval (snapshot/algebra.py) and as_snapshot (snapshot/build.py)
    Mutant("interval-sum-whole-run", _SNAP,
           "sums[h] = max(0, sa - sb) if sa is not None and sb is not None else None",
           "sums[h] = sa", _T_SNAP),
    Mutant("interval-min-whole-run", _SNAP,
           "stat[h, 2] = a_min if (b_min < 0 or a_min < b_min) else max(int(lo[i0]), a_min)",
           "stat[h, 2] = a_min", _T_SNAP),
    Mutant("as-snapshot-json-summary-none", _SNAP_BUILD,
           "if snap is None and not summary_only:", "if snap is None and summary_only:",
           _T_SNAP),
    # -- the snapshot's records through the codec (snapshot/records.py, _serial.py)
    Mutant("snapshot-record-int64-range", _SNAP_REC,  # a total past int64 read as valid
           "if not _is_int(v) or not _INT64_MIN <= v <= _INT64_MAX:", "if not _is_int(v):",
           ("tests/test_snapshot_validation.py",)),
    Mutant("serial-annotated-reader-ignored", "src/gyreprof/model/_serial.py",
           "        if len(reads) == 1:\n            return reads[0], nullable",
           "        if not reads:\n            return reads[0], nullable",
           ("tests/test_serial.py", "tests/test_snapshot_validation.py")),
    # -- windows read from snapshots (window.py) and exact ring windows (histogram.py)
    Mutant("win-read-p90-p99-swapped", _WINDOW,
           "float(hw.p90),\n                    float(hw.p99),",
           "float(hw.p99),\n                    float(hw.p90),", _T_WIN),
    Mutant("win-ring-lower-rule", _HISTPY,
           "math.ceil(q / 100.0 * n)", "math.floor(q / 100.0 * n)", _T_WIN),
    Mutant("win-ring-step-keys", _WINDOW,
           'keys = (ev["step"] - 1) // int(steps)', 'keys = ev["step"] // int(steps)', _T_WIN),
    # -- wait ratio and spikes
    Mutant("wait-ratio-inverted", _WAIT,
           "ratio=float(wait_ns / (wait_ns + compute_ns))",
           "ratio=float(compute_ns / (wait_ns + compute_ns))",
           ("tests/test_wait.py::test_constructed_ratio_and_windows_are_exact",)),
    Mutant("wait-spike-floor-dropped", _WAIT,
           "(per_step - med >= floor_ns)", "(per_step - med >= 0)",
           ("tests/test_wait.py::test_tiny_waits_do_not_spike",)),
    Mutant("wait-spike-factor-strict", _WAIT,
           "(per_step >= factor * med)", "(per_step > factor * med)",
           ("tests/test_wait_edges.py",)),
    Mutant("wait-options-keyword-ignored", _WAIT,  # a knob given as keyword was dropped
           "    out: _Opts = replace(record, **knobs)\n", "    out: _Opts = record\n",
           ("tests/test_options_records.py",)),
    Mutant("verdict-wait-knobs-not-passed-on", _VERDICT,
           "out = replace(out, wait_options=out.wait_options.replaced(passed, what=\"diagnose\"))",
           "out = replace(out, wait_options=out.wait_options)",
           ("tests/test_options_records.py",)),
    # -- verdict: the loop's shape, then the rule for that shape
    Mutant("verdict-sync-uses-wait-ratio", _VERDICT,  # other trainer phases ignored
           "return min(1.0, totals[wait] / total)", "return report.ratio",
           ("tests/test_verdict.py::test_sync_rule_counts_the_trainers_other_phases",)),
    Mutant("verdict-overlapped-threshold-inclusive", _VERDICT,
           "if r < trainer_bound_below:", "if r <= trainer_bound_below:",
           ("tests/test_verdict.py::test_threshold_is_a_parameter",
            "tests/test_verdict.py::test_low_wait_ratio_is_trainer_bound")),
    Mutant("verdict-sync-bound-inverted", _VERDICT,
           'return "sampler" if r > sync_sampler_above else "trainer"',
           'return "sampler" if r < sync_sampler_above else "trainer"', _T_SHAPE),
    Mutant("verdict-sync-judged-by-wait-threshold", _VERDICT,
           'if shape.loop == "sync":\n        bound, text = _judge_sync(',
           'if shape.loop == "never":\n        bound, text = _judge_sync(', _T_SHAPE),
    Mutant("verdict-shape-detection-inverted", _VERDICT,
           "if busy >= overlap_above:", "if busy < overlap_above:", _T_SHAPE),
    Mutant("verdict-shape-counts-idle-steps", _VERDICT,
           's_ev = sev[(sev["phase"] >= 0) & ~np.isin(sev["phase"], idle)]',
           "s_ev = sev", _T_SHAPE),
    Mutant("verdict-shape-idle-phases-kept", _VERDICT,
           's_ev = sev[(sev["phase"] >= 0) & ~np.isin(sev["phase"], idle)]',
           's_ev = sev[sev["phase"] >= 0]',
           ("tests/test_verdict.py::test_a_sampler_that_times_its_waiting_is_still_read_as_synchronous",)),
    Mutant("verdict-smallest-phase-leads", _VERDICT,
           "best = max(parts, key=lambda n: parts[n]) if parts else None",
           "best = min(parts, key=lambda n: parts[n]) if parts else None",
           ("tests/test_verdict.py::test_waiting_on_env_stepping",
            "tests/test_verdict.py::test_waiting_on_forward_or_transfer")),
    Mutant("verdict-idle-is-worked-time", _VERDICT,  # coverage read on the whole wall
           "    work = wall - idle_ns\n", "    work = wall\n",
           ("tests/test_verdict.py::test_idle_sampler_time_is_idle_not_untimed",)),
    Mutant("verdict-idle-uncapped", _VERDICT,
           "min(float(s_summary.counters.get(IDLE_COUNTER, 0)), max(0.0, wall - timed_ns))",
           "float(s_summary.counters.get(IDLE_COUNTER, 0))",
           ("tests/test_verdict.py::test_idle_sampler_time_is_idle_not_untimed",)),
    # -- the sampler's idle time: a blocking put into a full queue (libs/queues.py)
    Mutant("queue-put-trainer-idle", "src/gyreprof/integrations/libs/queues.py",
           "if t.waits_count(st._default_main) or not _full(full, q):",
           "if not _full(full, q):", ("tests/test_queue_put.py",)),
    Mutant("queue-put-with-room-timed", "src/gyreprof/integrations/libs/queues.py",
           "if t.waits_count(st._default_main) or not _full(full, q):",
           "if t.waits_count(st._default_main):", ("tests/test_queue_put.py",)),
    # -- sweep decisions: the distinguishability rule (rule.py), the stop rule (decide.py)
    Mutant("sweep-distinguishable-inverted", _RULE,
           "return hi / lo > (1.0 + flat_within) * (1.0 + noise_)",
           "return hi / lo < (1.0 + flat_within) * (1.0 + noise_)",
           ("tests/test_sweep.py::test_not_distinguishable_and_recommendation",)),
    Mutant("sweep-noise-ignored", _RULE,  # argmax follows the noise
           "(1.0 + flat_within) * (1.0 + noise_)", "(1.0 + flat_within) * (1.0 + 0.0 * noise_)",
           ("tests/test_sweep.py::test_recommendation_where_argmax_flips_with_the_noise",)),
    Mutant("sweep-noise-narrowest", _RULE,
           "return 2.0 * statistics.median(widths) if widths else 0.0",
           "return min(widths) if widths else 0.0",
           ("tests/test_sweep.py::test_not_distinguishable_and_recommendation",
            "tests/test_sweep.py::test_recommendation_where_argmax_flips_with_the_noise")),
    Mutant("sweep-noise-widest", _RULE,  # one erratic value hid a 2x difference
           "return 2.0 * statistics.median(widths) if widths else 0.0",
           "return max(widths) if widths else 0.0",
           ("tests/test_sweep.py::test_one_erratic_value_does_not_hide_a_real_difference",)),
    Mutant("sweep-recommend-largest", _DECIDE,
           "        for p in _eligible(points)\n",
           "        for p in reversed(_eligible(points))\n",
           ("tests/test_sweep.py::test_not_distinguishable_and_recommendation",)),
    Mutant("sweep-stop-when-rising", _DECIDE,
           "if gain <= flat_within and mem_rising(prev, cur):",
           "if gain >= flat_within and mem_rising(prev, cur):",
           ("tests/test_sweep.py::test_stop_rule_needs_flat_throughput_and_rising_memory",)),
    # -- doctor: spinning / blocked / busy / progressing (the rule table and its evidence)
    Mutant("doctor-idle-activity-ignored", _DOCTOR_RULES,  # a stream reader was called blocked
           'lambda f: f.progressed is None and bool(f.activity),',
           'lambda f: f.progressed is None and False,',
           ("tests/test_doctor.py::test_an_idle_process_reading_a_stream_is_busy_not_blocked",
            "tests/test_doctor.py::test_a_parent_waiting_on_working_children_is_busy_not_blocked")),
    Mutant("doctor-spin-threshold-inverted", _DOCTOR_RULES,
           "cpu_share >= SPIN_CPU_SHARE) or (\n        running_share >= BUSY_RUNNING_SHARE",
           "cpu_share <= SPIN_CPU_SHARE) or (\n        running_share >= BUSY_RUNNING_SHARE",
           _T_SHAPE),
    Mutant("doctor-still-step-is-progress", _DOCTOR_EVIDENCE,
           "progressed = last.steps > first.steps or phases_moved",
           "progressed = last.steps >= first.steps or phases_moved",
           ("tests/test_doctor.py::test_retrying_finding_from_live_counters",)),
    Mutant("doctor-no-signal-is-progress", _DOCTOR_RULES,  # CPU time taken as progress
           'lambda f: f.progressed is True,', 'lambda f: f.progressed is not False,', _T_SHAPE),
    Mutant("doctor-busy-without-signal-is-spinning", _DOCTOR_RULES,
           'Rule("busy-no-signal", "busy",', 'Rule("busy-no-signal", "spinning",', _T_SHAPE),
    Mutant("doctor-quiet-files-are-a-stall", _DOCTOR_EVIDENCE,
           '_Progress("files", None, [quiet]', '_Progress("files", False, [quiet]',
           ("tests/test_doctor.py::test_busy_loop_whose_output_file_stays_quiet",)),
    Mutant("doctor-stopped-rule-after-progress", _DOCTOR_RULES,  # a paused loop that moved
           'Rule("stopped", "blocked", lambda f: f.stopped,',
           'Rule("stopped", "blocked", lambda f: f.stopped and not f.progressed,',
           _T_SHAPE),
    Mutant("doctor-quiet-output-after-busy", _DOCTOR_RULES,  # the naive order of the table
           'and f.source == "files" and f.quiet_output is not None',
           'and f.source == "files" and f.quiet_output is not None and not f.busy',
           ("tests/test_doctor_rules.py",)),
    Mutant("doctor-repeated-value-is-progress", "src/gyreprof/diagnostics/_loglines.py",
           "moved = any(name in last and last[name] != v for name, v in seen.items())",
           "moved = bool(seen)",
           ("tests/test_doctor_counters.py::test_counters_and_still_lines",
            "tests/test_doctor_counters.py::test_constant_heartbeat_is_not_progress")),
    Mutant("doctor-growth-is-progress", "src/gyreprof/diagnostics/doctor.py",
           'if not progress.progressed or progress.source not in ("log", "files") or lines.progress:',
           'if True:',
           ("tests/test_doctor_counters.py::test_waiting_for_ranks_lines_are_not_progress",)),
    Mutant("doctor-syn-attempts-ignored", _DOCTOR_EVIDENCE,
           "if len(syn) >= 2:", "if len(syn) >= 2000:",
           ("tests/test_doctor_attempts.py::"
            "test_debug_only_backoff_against_a_dropping_endpoint_is_retrying",)),
    Mutant("doctor-new-threads-grouped-by-local-port", _DOCTOR_EVIDENCE,
           'what = _LOCAL_END.sub(r"on a \\1 socket to ", what)', "pass",
           ("tests/test_doctor_attempts.py::test_new_threads_waiting_on_one_peer_are_retrying",)),
    Mutant("doctor-zombie-child-not-looked-for", "src/gyreprof/diagnostics/_feeders.py",
           "if child.status() != psutil.STATUS_ZOMBIE:", "if True:",
           ("tests/test_doctor_feeders.py::test_a_dead_worker_process_on_a_pipe_is_said_first",)),
    Mutant("doctor-thread-traceback-not-read", "src/gyreprof/diagnostics/_feeders.py",
           "thread, frames, inside = m.group(\"name\"), [], False",
           "thread, frames, inside = None, [], False",
           ("tests/test_doctor_feeders.py::test_tracebacks_are_read_from_output",)),
    Mutant("run-first-reset-is-a-start", "src/gyreprof/commands/_startup.py",
           "if self._recorded() and self._progress_events() != 0:",
           "if self._recorded():",
           ("tests/test_run_stall.py::test_a_first_reset_is_not_a_start",)),
    Mutant("run-stall-watch-sleeps", "src/gyreprof/commands/_startup.py",
           "if moved <= 0 or now - self.moved_at < self.stall_s:",
           "if True:",
           ("tests/test_run_stall.py::"
            "test_a_trainer_whose_feeder_died_gets_nothing_moved_and_the_report_says_so_first",)),
    Mutant("doctor-deadlock-needs-both-ways", "src/gyreprof/diagnostics/_deadlock.py",
           "if a.waits[0] in b.holds and b.waits[0] in a.holds:",
           "if a.waits[0] in b.holds or b.waits[0] in a.holds:",
           ("tests/test_doctor_deadlock.py::test_a_chain_of_waits_is_no_cycle",)),
    Mutant("doctor-possible-deadlock-any-wait", "src/gyreprof/diagnostics/_deadlock.py",
           'if getattr(w, "syscall", None) not in ("futex", "futex_waitv"):',
           "if False:",
           ("tests/test_doctor_deadlock.py::"
            "test_a_possible_deadlock_needs_every_thread_asleep_on_a_lock",)),
    Mutant("doctor-empty-buffered-log-is-a-stall", "src/gyreprof/diagnostics/doctor.py",
           'progress = _Progress("log", None, progress.evidence, progress.steps, progress.watched)',
           "pass",
           ("tests/test_doctor_counters.py::test_a_buffered_slow_start_is_busy_not_spinning",)),
    Mutant("doctor-stderr-called-block-buffered", _DOCTOR_EVIDENCE,
           'streams = ((1, "stdout"),)', "pass",
           ("tests/test_doctor_counters.py::test_a_buffered_slow_start_is_busy_not_spinning",)),
    Mutant("selfcheck-frozen-catches-counted", "src/gyreprof/diagnostics/_selfcheck_child.py",
           'if caught.startswith("<") or (', "if (",
           ("tests/test_selfcheck.py::"
            "test_an_http_answer_under_other_keys_shows_the_status_and_keys",)),
    Mutant("selfcheck-empty-fields-are-a-failure", "src/gyreprof/diagnostics/_selfcheck_child.py",
           'if rule == "refused" and empty_sequences(result):', "if False:",
           ("tests/test_selfcheck.py::"
            "test_an_object_whose_list_field_is_empty_is_empty_not_a_failure",)),
    Mutant("doctor-probe-without-ctypes-setns", "src/gyreprof/diagnostics/_probe.py",
           'return getattr(os, "setns", None) or _libc_setns()',
           'return getattr(os, "setns", None)',
           ("tests/test_doctor_netns.py",)),
    Mutant("doctor-probe-from-the-host-namespace", "src/gyreprof/diagnostics/_probe.py",
           "    if not enter:\n        return", "    if True:\n        return",
           ("tests/test_doctor_netns.py",)),
    Mutant("verdict-shares-past-100", _VERDICT,
           "    elif timed_ns > wall:\n", "    elif False:\n",
           ("tests/test_verdict.py::"
            "test_sampler_shares_sum_to_100_when_its_phases_run_a_little_past_the_wall",)),
    Mutant("doctor-held-connection-error-ignored", _DOCTOR_EVIDENCE,
           "held = next((h for h in map(_HELD_ERROR.match, local.values()) if h), None)",
           "held = None",
           ("tests/test_doctor_attempts.py::"
            "test_debug_only_backoff_against_a_refused_loopback_is_retrying_from_the_stacks",)),
    Mutant("doctor-read-only-file-watched", "src/gyreprof/diagnostics/_procfs.py",
           "if fd > 2 and (flags is None or (flags & 0o3) not in (0o1, 0o2)):",
           "if fd > 2 and flags is None:",
           ("tests/test_procfs_psutil.py",)),
    Mutant("doctor-wakeups-of-every-thread", "src/gyreprof/diagnostics/_procfs.py",
           "return int(psutil.Process(pid).num_ctx_switches().voluntary)",
           "return sum(int(psutil.Process(t.id).num_ctx_switches().voluntary) "
           "for t in psutil.Process(pid).threads())",
           ("tests/test_procfs_psutil.py",)),
    # -- one meaning of a sampler's return value (_sample_count.py)
    Mutant("count-bool-is-a-count", _COUNT,
           "if isinstance(value, bool):", "if isinstance(value, bytes):",
           ("tests/test_sweep.py::test_count_samples_rules",)),
    Mutant("count-dict-lengths-unchecked", _COUNT,
           "if len(lengths) == 1 and None not in lengths:", "if None not in lengths:",
           ("tests/test_sweep.py::test_count_samples_rules",)),
    Mutant("count-array-last-dimension", _COUNT,
           'SampleCount(dims[0], "first dimension"', 'SampleCount(dims[-1], "first dimension"',
           ("tests/test_sweep.py::test_count_samples_rules",
            "tests/test_decision_rules.py::test_an_array_counts_its_first_dimension")),
    # -- start-up told apart (analysis/startup.py, Snapshot.first_step_as_warmup)
    Mutant("startup-median-factor-ignored", _STARTUP,
           "if first < OVER_MEDIAN * rest.p50 or first < OVER_MAX * rest.max:",
           "if first < OVER_MAX * rest.max:", _T_STARTUP),
    Mutant("startup-stall-is-start-up", _STARTUP,  # the shortcut "first >> median"
           "if first < OVER_MEDIAN * rest.p50 or first < OVER_MAX * rest.max:",
           "if first < OVER_MEDIAN * rest.p50:", _T_STARTUP),
    Mutant("startup-moves-nothing-left-out", _STARTUP,
           "if not abs(with_it - without) >= MIN_MOVE:", "if False:", _T_STARTUP),
    Mutant("startup-too-few-steps", _STARTUP,
           "if rest.count < MIN_REST:", "if rest.count < 1:", _T_STARTUP),
    Mutant("first-step-rate-counts-it", _SNAP_MODEL,
           "rate=(steps - 1) / (steady / 1e9)", "rate=steps / (steady / 1e9)", _T_STARTUP),
    Mutant("first-step-max-from-buckets", _SNAP_MODEL,
           "top = later_max[h] if later_max is not None else", "top = -1 if False else",
           _T_STARTUP),
    Mutant("first-step-open-step-refused", _SNAP_MODEL,  # a killed run's live segment
           "open_step = 1 if totals.steps_begun == totals.steps_completed + 1 else 0",
           "open_step = 0", _T_STARTUP),
    Mutant("first-step-window-left-steady", "src/gyreprof/_support/block.py",
           "out[(first <= through_step) &", "out[(first < through_step) &", _T_STARTUP),
    Mutant("bootstrap-lacking-unchecked", "src/gyreprof/integrations/_auto/bootstrap.py",
           "missing = lacking()", "missing = None", ("tests/test_run_uninstrumented.py",)),
    Mutant("bootstrap-trigger-gives-no-spec", "src/gyreprof/integrations/_auto/bootstrap.py",
           "            return spec_from_others(self, fullname, path, target)",
           "            return None", ("tests/test_run_light_start.py",)),
    Mutant("trail-threads-imported-late-untraced", "src/gyreprof/integrations/_auto/trail.py",
           "            _give_threads_the_tracer(module)\n", "            pass\n",
           ("tests/test_trail.py",)),
    Mutant("trail-line-list-not-json", "src/gyreprof/integrations/_auto/trail.py",
           'return "[" + ", ".join(_dumps(v) for v in value) + "]"',
           'return "[" + ",".join(_dumps(v) for v in value) + "]"', ("tests/test_trail.py",)),
    Mutant("profiler-create-hooks-not-called", "src/gyreprof/recording/profiler.py",
           "        for hook in _on_create:", "        for hook in ():",
           ("tests/test_run_light_start.py",)),
    # -- the training timeline (Python): blocks, trainer steps, the request wait's gate
    Mutant("tl-block-start-not-earliest", _TL,
           "if self.blk_start < 0 or start_ns < self.blk_start:", "if self.blk_start < 0:",
           _T_TL),
    Mutant("tl-block-end-not-latest", _TL,
           "if end_ns > self.blk_end:", "if self.blk_end < 0:", _T_TL),
    Mutant("tl-training-thread-closes-per-wait", _TL,
           "not self.trains\n            and default_main != 0", "default_main != 0", _T_TL),
    Mutant("tl-every-no-grad-block-a-forward", _TL,
           "if self.srec.last_write_ns() > end:", "if True:", _T_TL),
    Mutant("tl-compute-not-closed", _TL,
           "        if self.step_open:\n            trec.lap_at(COMPUTE, start)\n", "", _T_TL),
    Mutant("tl-own-wait-counted-fed", _TL,
           "own = since >= 0 or self.blk_own", "own = since >= 0", _T_TL),
    Mutant("tl-start-up-not-trimmed", _TL,
           "start = self._trim_start_up(start, end)", "pass", _T_TL),
    Mutant("tl-request-wait-ungated", _TL,
           "if not self.waits_count(default_main):\n            return",
           "if False:\n            return", _T_TL),
    # -- the request log's plain row (rollout_log.ThreadLog)
    Mutant("rl-retry-at-any-endpoint", _RL,
           "if prev is not None and prev[0] == ep:", "if prev is not None:", _T_RL),
    Mutant("rl-empty-kept-on-failure", _RL,
           "                else:\n                    empty = None\n", "", _T_RL),
    Mutant("rl-failure-never-cleared", _RL,
           "        elif _last_failure.get() is not None:\n            _last_failure.set(None)\n"
           "        return end", "        return end", _T_RL),
    Mutant("rl-fold-one-late", _RL,
           "        if len(spans) >= cap:", "        if len(spans) > cap:", _T_RL),
    # -- the plain send (http._common.PlainSend) and the trainer's wait
    Mutant("ps-wait-skipped", _PS,
           "    t.request_wait(start_ns, end_ns, st._default_main)", "    pass",
           ("tests/test_http_rollouts.py",)),
    Mutant("ps-probe-is-a-wait", _PS,
           "    if rl.probe_endpoints and rl.last_is_probe():", "    if False:", _T_RL),
    Mutant("ps-stream-is-plain", _HTTPX,
           "    return active.get(), request, bool(kwargs.get(\"stream\", False))",
           "    return active.get(), request, False", ("tests/test_http_rollouts.py",)),
    Mutant("ps-owned-is-plain", _HTTPX,
           "        if outer is not None:\n"
           "            if outer.client != \"openai\" or request is None:\n"
           "                return wrapped(*args, **kwargs)  # another layer owns it",
           "        if False:\n"
           "            if outer.client != \"openai\" or request is None:\n"
           "                return wrapped(*args, **kwargs)  # another layer owns it",
           ("tests/test_http_rollouts.py",)),
    Mutant("ps-4xx-is-ok", _RL,  # the status classes every path (plain send included) reads
           "    if 400 <= status:\n        return \"4xx\"",
           "    if 600 <= status:\n        return \"4xx\"", _T_RL),
    Mutant("ps-layer-left-set", _PS,
           "        if token is not None:\n            active.reset(token)\n        try:\n"
           "            status = resp.status_code",
           "        try:\n            status = resp.status_code", _T_RL),
    Mutant("ps-failure-unrecorded", _PS,
           "            plain_failed(log, ep, self.client, start, retried, sent, exc)\n", "",
           _T_RL),
    # -- the layers' pass-through (http.client under a client that owns its request)
    Mutant("gate-attr-inverted", _GATE,
           "    if req is None:  # no request of this layer open on the connection",
           "    if req is not None:  # no request of this layer open on the connection", _T_GATE),
    Mutant("gate-missing-attr-to-wrapper", _GATE,
           "        _patches.set(mod.HTTPConnection, OPEN, None)\n", "",
           ("tests/test_http_instrumentors.py",)),
    Mutant("gate-var-inverted", _GATE,
           "    if active.get() is not None:  # urllib, requests: their layer owns it",
           "    if active.get() is None:  # urllib, requests: their layer owns it", _T_GATE),
    Mutant("gate-raising-attr-breaks", _GATE,
           "    except Exception:  # noqa: BLE001 - an attribute that raises: not ours\n"
           "        req = None",
           "    except AttributeError:  # noqa: BLE001 - an attribute that raises: not ours\n"
           "        req = None", _T_GATE),
    # -- streams read across chunks, aiohttp's body, usage at every status (issue 34)
    Mutant("scan-state-not-carried", f"{_CORE_DIR}/bodyscan.pyx",
           "        self.state = state\n        self.cand = cand",
           "        self.state = _IDLE\n        self.cand = cand", _T_STREAMS),
    Mutant("scan-pending-number-lost", f"{_CORE_DIR}/bodyscan.pyx",
           "        if self.state == _NUM and self.kind == 2:", "        if False:", _T_STREAMS),
    Mutant("aio-ends-at-headers", "src/gyreprof/integrations/http/aiohttp.py",
           "    _open[id(reader)] = body\n    return True",
           "    _close(body)\n    return True", _T_STREAMS),
    Mutant("urllib-error-body-unread", _GATE,
           "            guard(wrap_read, exc, req)\n", "", _T_STREAMS),
    # -- the servers' own figures (analysis/server_metrics.py)
    Mutant("sm-restart-counted-negative", _SM,
           "        total += b - a if b >= a else b", "        total += b - a", _T_SM),
    Mutant("sm-after-first-is-all", _SM,
           "        after = [r[2] for r in rows if r[0] is not None and r[0] >= first_end_ns]",
           "        after = [r[2] for r in rows]", _T_SM),
    # -- the rollout cause (analysis/rollout_cause.py, issue 34)
    Mutant("cause-start-up-queue-counts", _RC,
           "    after = s.series[-s.after_first_reads :]", "    after = s.series",
           (f"{_T_RC}::test_a_queue_only_at_start_up_is_not_queueing",)),
    Mutant("cause-no-histogram-witness", _RC,
           "        if share < QUEUE_SHARE:\n            return None",
           "        if True:\n            return None",
           (f"{_T_RC}::test_reads_that_missed_the_work_leave_the_queue_to_the_histograms",)),
    Mutant("cause-leads-a-trainer-bound-run", _VERDICT,
           '    cause = o.rollout_cause if found.bound in ("sampler", "balanced") else None',
           "    cause = o.rollout_cause",
           ("tests/test_decision_rules.py::"
            "test_a_rollout_cause_leads_only_where_the_trainer_waits_the_larger_share",)),
    Mutant("cause-any-replica-is-slow", _RC,
           "    if ratio < SLOW_REPLICA:", "    if ratio < 1.0:",
           (f"{_T_RC}::test_the_slow_replica_is_named_with_its_tokens_and_time",)),
    Mutant("cause-full-cache-underfed", _RC,
           "    if s.kv_max is not None and s.kv_max >= KV_ROOM:\n        return None",
           "    if False:\n        return None",
           (f"{_T_RC}::test_a_server_with_room_and_a_capped_client_is_underfed",)),
    # -- a dead feeder (analysis/feeders.py, integrations/_auto/state.py, issue 38 item 4)
    Mutant("feeder-starved-at-half", "src/gyreprof/analysis/feeders.py",
           "STARVED = 0.8", "STARVED = 0.5",
           ("tests/test_dead_feeder.py::"
            "test_a_trainer_slowed_but_still_fed_after_a_death_is_not_starved",)),
    Mutant("feeder-no-rise", "src/gyreprof/analysis/feeders.py",
           "RISE = 0.2", "RISE = -1.0",
           ("tests/test_dead_feeder.py::"
            "test_a_death_the_trainer_kept_its_pace_after_is_no_feeder_even_when_it_waits_most",)),
    Mutant("feeder-no-first-half", "src/gyreprof/analysis/feeders.py",
           "    return after if min(after, half) >= STARVED else None",
           "    return after if after >= STARVED else None",
           ("tests/test_dead_feeder.py::"
            "test_the_first_death_that_starved_it_is_named_not_an_earlier_harmless_one",)),
    Mutant("feeder-backlog-ignored", "src/gyreprof/analysis/feeders.py",
           "        latest = at + int(DRAIN_SLACK * (max(backlog, 0) + 1) * compute) if backlog > 0 else at",
           "        latest = at",
           ("tests/test_dead_feeder.py::"
            "test_a_feeder_that_left_a_backlog_is_named_once_the_trainer_took_it",)),
    Mutant("feeder-backlog-unbounded", "src/gyreprof/analysis/feeders.py",
           "        latest = at + int(DRAIN_SLACK * (max(backlog, 0) + 1) * compute) if backlog > 0 else at",
           "        latest = end",
           ("tests/test_dead_feeder.py::"
            "test_a_small_backlog_does_not_explain_a_starvation_long_after_the_death",)),
    Mutant("feeder-backlog-unread", "src/gyreprof/integrations/_auto/deaths.py",
           "            backlog=backlog(),", "            backlog=-1,",
           ("tests/test_dead_feeder.py::"
            "test_gyreprof_run_names_a_feeder_that_died_with_a_backlog_in_its_queue",)),
    Mutant("feeder-death-only-record-unsaved", "src/gyreprof/integrations/_auto/state.py",
           "    if run_dir is None or not _deaths.deaths():\n        return",
           "    if True:\n        return",
           ("tests/test_dead_feeder.py::"
            "test_a_feeder_that_died_before_recording_anything_is_still_named",)),
    # -- where the sampler's time goes (analysis/verdict.py, issue 38 items 2-3)
    Mutant("vector-halves-ranked-apart", "src/gyreprof/analysis/verdict.py",
           "    if vec is not None and (best is None or vec >= parts[best]):",
           "    if vec is not None and best is None:",
           ("tests/test_verdict.py::test_the_two_halves_of_a_vector_step_rank_as_one_env_step",)),
    Mutant("round-trip-whatever-the-workers-step", "src/gyreprof/analysis/verdict.py",
           "    if step_s <= 0 or each_s * ROUND_TRIP_X > step_s:", "    if step_s <= 0:",
           ("tests/test_verdict.py::"
            "test_a_vector_step_that_costs_more_than_its_workers_stepping_is_its_round_trip",)),
    Mutant("sweep-advice-ignores-the-command", "src/gyreprof/analysis/verdict.py",
           "    if found.command is None:", "    if True:",
           ("tests/test_verdict.py::"
            "test_the_next_step_sweeps_the_runs_own_command_or_names_the_setting",)),
    Mutant("grad-forward-never-pending", "src/gyreprof/integrations/_auto/state.py",
           "    if t.ng_depth > 0 or t.srec.last_write_ns() != last_write:", "    if True:",
           ("tests/test_signals_run.py::"
            "test_a_dqn_loop_that_picks_actions_with_grad_on_counts_that_forward_as_sampling",)),
    # -- an asyncio trainer's wait (integrations/_auto/loop_wait.py): never before the update
    Mutant("loop-wait-reaches-into-the-update", "src/gyreprof/integrations/_auto/loop_wait.py",
           "    if start < floor:\n        start = floor", "    if start < floor:\n        pass",
           ("tests/test_signals_asyncio.py::"
            "test_a_batch_asked_for_before_the_update_is_no_wait_once_answered",)),
    # -- the default trainer's block ends only at a whole wait (loop_wait, rollout_log, queues)
    Mutant("loop-idle-spell-ends-block", "src/gyreprof/integrations/_auto/loop_wait.py",
           "    _report(w, start, end, kind, False)", "    _report(w, start, end, kind, True)",
           ("tests/test_signals_asyncio.py::"
            "test_a_trainer_that_steps_no_optimizer_gets_one_step_a_batch",)),
    Mutant("gathered-request-ends-block", "src/gyreprof/integrations/_auto/rollout_log.py",
           "_lw.awaited(self.start, whole=not _lw.in_group())",
           "_lw.awaited(self.start, whole=True)",
           ("tests/test_signals_asyncio.py::"
            "test_a_trainer_that_steps_no_optimizer_gets_one_step_a_batch",)),
    Mutant("finished-future-in-a-loop-is-a-wait", "src/gyreprof/integrations/libs/queues.py",
           "            if _in_loop() and self.done():", "            if False:",
           ("tests/test_signals_asyncio.py::"
            "test_a_trainer_that_steps_no_optimizer_gets_one_step_a_batch",)),
    # -- a replica that queues is named with its own setting (analysis/rollout_cause.py)
    Mutant("queueing-replica-unnamed", "src/gyreprof/analysis/rollout_cause.py",
           "    elif others:\n        step = _replica_step(e, others)",
           "    elif False:\n        step = _replica_step(e, others)",
           ("tests/test_rollout_cause.py::"
            "test_a_replica_that_queues_short_of_slow_is_named_with_its_own_setting",)),
    # -- a Ray worker's method calls are its batches, its stack samples sent home (ray/job.py)
    Mutant("ray-method-calls-no-batches", "src/gyreprof/integrations/ray/job.py",
           "            return collecting(ex, __ray_actor, *a, **kw)",
           "            return ex(__ray_actor, *a, **kw)",
           ("tests/test_ray_cluster.py::test_a_verl_style_token_job",)),
    Mutant("learners-call-is-a-batch", "src/gyreprof/integrations/_auto/batches.py",
           "        if not t.trains:\n            end = t.now()",
           "        if True:\n            end = t.now()",
           ("tests/test_worker_batches.py",)),
    Mutant("ray-worker-sites-unsent", "src/gyreprof/integrations/ray/job.py",
           '    out["sites"] = _sites(final)', '    out["sites"] = None',
           ("tests/test_ray_cluster.py::test_a_verl_style_token_job",)),
    # -- the instrumentors' undo (integrations/_instrument.py)
    Mutant("undo-leaves-wrapper", "src/gyreprof/integrations/_instrument.py",
           "        self._done.append((owner, name, before, True))",
           "        self._done.append((owner, name, _MISSING, True))",
           ("tests/test_instrument_patches.py",)),
    Mutant("undo-leaves-hot-function", "src/gyreprof/integrations/_instrument.py",
           "                else:\n                    setattr(owner, name, what)",
           "                else:\n                    pass", ("tests/test_http_instrumentors.py",)),
    Mutant("undo-keeps-class-default", "src/gyreprof/integrations/_instrument.py",
           "                if what is _MISSING:\n                    delattr(owner, name)",
           "                if what is _MISSING:\n                    pass",
           ("tests/test_http_instrumentors.py",)),
    # -- one instrumentor per library (integrations/libs/, Instrumentor in _instrument.py)
    Mutant("instrumentor-undoes-at-first-uninstrument", "src/gyreprof/integrations/_instrument.py",
           "            self.depth -= 1\n            if self.depth == 0:\n                self.patches.undo()",
           "            self.depth = 0\n            if self.depth == 0:\n                self.patches.undo()",
           ("tests/test_instrumentors.py",)),
    Mutant("instrumentor-not-again-after-undo", "src/gyreprof/integrations/_instrument.py",
           "        if module is not None and not _initializing(module):\n            self._run(name, callback, module)",
           "        if module is not None and not _initializing(module):\n            pass",
           ("tests/test_instrumentors.py",)),
    Mutant("undo-keeps-optimizer-hooks", "src/gyreprof/integrations/_instrument.py",
           "                try:\n                    what()",
           "                try:\n                    pass",
           ("tests/test_instrumentors.py",)),
    Mutant("subclass-hook-runs-only-the-first", "src/gyreprof/integrations/_instrument.py",
           "            for fn in list(todo):\n                fn(sub)",
           "            for fn in list(todo)[:1]:\n                fn(sub)",
           ("tests/test_instrument_patches.py",)),
    Mutant("asyncio-undo-keeps-selector-wrapper", "src/gyreprof/integrations/libs/asyncio.py",
           "        if is_wrapped(sel.__dict__.get(\"select\")):\n            del sel.select",
           "        if is_wrapped(sel.__dict__.get(\"select\")):\n            pass",
           ("tests/test_instrumentors.py",)),
    # -- one run, every door (issue 33 item 7): the run's table, report on its snaps, top
    Mutant("doors-table-shares-not-the-verdicts", "src/gyreprof/render/text.py",
           "if v is not None and v.sampler_shares and _same_wall(timed, v.sampler_shares):",
           "if v is not None and v.sampler_shares and not _same_wall(timed, v.sampler_shares):",
           ("tests/test_run_doors.py::"
            "test_the_run_table_shows_the_verdicts_shares_with_the_untimed_row",)),
    Mutant("doors-snaps-shape-not-read", "src/gyreprof/commands/report.py",
           'shape = {"loop": args.loop} if args.loop else _recorded_shape(trainer, names[-1])',
           'shape = {"loop": args.loop} if args.loop else {}',
           ("tests/test_run_doors.py::"
            "test_report_of_the_runs_snaps_reads_the_runs_shape_and_shares",)),
    Mutant("doors-top-merges-every-kind", "src/gyreprof/live/_top.py",
           "    return max(kinds.values(), key=len)",
           "    return [v for v in views if v.snapshot is not None]",
           ("tests/test_run_doors.py::test_top_never_adds_a_samplers_segment_to_a_trainers",)),
    Mutant("doors-top-sync-wall-not-the-waits", "src/gyreprof/live/_top.py",
           "if own > fed and wait is not None and wait.sum_ns > 0:",
           "if own < fed and wait is not None and wait.sum_ns > 0:",
           ("tests/test_run_doors.py::test_top_never_adds_a_samplers_segment_to_a_trainers",)),
    # -- the stall watch's read of a segment (issue 33, round 5): a snapshot's counts
    Mutant("watch-counts-leave-out-the-warm-up", "src/gyreprof/live/reader.py",
           "totals = block.counts[:n].sum(axis=1) + block.warm[:n, 0]",
           "totals = block.counts[:n].sum(axis=1)",
           ("tests/test_live.py::"
            "test_event_counts_are_the_snapshots_counts_read_without_a_snapshot",)),
    Mutant("watch-counts-unchecked", "src/gyreprof/live/reader.py",
           "            self._check_copy(stats)  # what a snapshot refuses",
           "            pass  # what a snapshot refuses",
           ("tests/test_live.py::test_event_counts_refuse_counts_no_writer_produces",)),
    # -- a run's own costs measured once per Python (issue 33, round 5)
    Mutant("calibration-takes-a-negative-cost", "src/gyreprof/integrations/_auto/calibration.py",
           "if not 0.0 <= f < LIMIT_NS:", "if not f < LIMIT_NS:",
           ("tests/test_calibration.py::test_a_file_no_measurement_writes_is_measured_over",)),
    Mutant("calibration-every-process-measures", "src/gyreprof/integrations/_auto/calibration.py",
           "        if got is not None:\n            return got",
           "        if got is None:\n            return got",
           ("tests/test_calibration.py::test_the_first_process_measures_and_the_next_reads",
            "tests/test_calibration.py::"
            "test_a_runs_spawn_workers_take_the_costs_its_main_process_measured")),
    Mutant("sites-one-sample-gets-a-line", "src/gyreprof/analysis/sites.py",
           "MIN_LINE_SAMPLES = 3", "MIN_LINE_SAMPLES = 1",
           ("tests/test_run_sites.py::"
            "test_a_list_resting_on_one_or_two_samples_gets_no_line_but_stays_in_the_json",)),
    Mutant("sites-tiny-untimed-gets-a-line", "src/gyreprof/analysis/sites.py",
           "MIN_UNTIMED_LINE = 0.05", "MIN_UNTIMED_LINE = 0.0",
           ("tests/test_run_sites.py::"
            "test_a_list_resting_on_one_or_two_samples_gets_no_line_but_stays_in_the_json",)),
    # -- trust, round three (issue 37): fds, exec images, shared autosave, shares, signals
    Mutant("trust3-closes-an-fd-not-ours", "src/gyreprof/_support/io.py",
           "        if mine:\n            try:\n                os.close(fd)",
           "        if True:\n            try:\n                os.close(fd)",
           ("tests/test_run_fds_signals_shares.py::"
            "test_a_live_reader_whose_fd_became_a_program_file_neither_reads_nor_closes_it",)),
    Mutant("trust3-segment-mapping-keeps-its-fd", "src/gyreprof/live/publish.py",
           "            self._owner = _ctypes_map(fd, size)",
           "            self._owner = mmap.mmap(\n                fd, size, mmap.MAP_SHARED, "
           "mmap.PROT_READ | mmap.PROT_WRITE\n            )",
           ("tests/test_run_fds_signals_shares.py::"
            "test_a_program_that_closes_every_fd_and_opens_its_own_files_keeps_every_byte",)),
    Mutant("trust3-exec-images-one-number", "src/gyreprof/integrations/_auto/collect.py",
           "        e.image = seen.get(e.pid, 0)", "        e.image = 0",
           ("tests/test_run_fds_signals_shares.py::"
            "test_each_image_of_an_exec_under_save_keeps_its_record_and_report_counts_once",)),
    Mutant("trust3-autosave-since-the-profiler", "src/gyreprof/recording/_autosave.py",
           "        if not changed and not _written_since_start(path):",
           "        if not changed:",
           ("tests/test_autosave.py::"
            "test_eight_spawned_workers_on_one_path_keep_every_writers_data",)),
    Mutant("trust3-shares-over-one-summed", "src/gyreprof/_support/checks.py",
           "    if total > 1.0 + SHARE_ROUNDING * max(1, len(shares)):",
           "    if False:",
           ("tests/test_run_fds_signals_shares.py::"
            "test_the_summary_decoder_refuses_impossible_shares_nan_and_missing_keys",)),
    Mutant("trust3-share-base-step-only", "src/gyreprof/_support/checks.py",
           "    return max(step_total, phase_total)", "    return step_total or phase_total",
           ("tests/test_run_fds_signals_shares.py::"
            "test_durations_given_to_record_never_make_a_share_above_one",)),
    Mutant("trust3-segment-region-unchecked", "src/gyreprof/live/_layout.py",
           "        if key not in offsets:", "        if False:",
           ("tests/test_run_fds_signals_shares.py::"
            "test_a_segment_whose_metadata_lacks_a_region_is_a_value_error_never_no_segment",)),
    Mutant("trust3-command-shares-the-group", "src/gyreprof/commands/run.py",
           "    own_group = not _terminal_on_stdin()", "    own_group = False",
           ("tests/test_run_fds_signals_shares.py::"
            "test_sigint_to_the_process_group_reaches_the_command_once",)),
    Mutant("trust3-getsignal-shows-gyreprofs", "src/gyreprof/integrations/_auto/state.py",
           "    _autosave.hide_own_handlers()", "    pass",
           ("tests/test_run_fds_signals_shares.py::"
            "test_getsignal_under_gyreprof_run_shows_what_the_program_would_see",)),
    # -- issue 38: code sites from stack samples, two Profilers on one thread
    Mutant("sites-shares-not-held-to-untimed", "src/gyreprof/analysis/sites.py",
           "sum(s.samples for s in sites.sampler), max(0.0, untimed))",
           "sum(s.samples for s in sites.sampler), 1.0)",
           ("tests/test_run_sites.py::"
            "test_site_shares_stay_within_the_untimed_share_and_hedge_few_samples",)),
    Mutant("stacks-closed-block-loses-its-samples", "src/gyreprof/integrations/_auto/stacks.py",
           "            if x <= cut:", "            if x < 0:",
           ("tests/test_run_sites.py::test_samples_are_sorted_by_the_threads_timeline",)),
    Mutant("workers-not-judged", _VERDICT,
           "    if o.collector_workers is not None:", "    if False:",
           ("tests/test_torchrl_workers.py::test_the_workers_are_the_sampler_the_verdict_judges",)),
    Mutant("own-sites-beside-the-workers", _VERDICT,
           "        if line is not None and not found.workers_judged:",
           "        if line is not None:",
           ("tests/test_torchrl_workers.py::test_the_workers_are_the_sampler_the_verdict_judges",)),
    Mutant("trainer-bound-workers-tuned", _VERDICT,
           '    if found.bound in ("sampler", "balanced", "unknown") and not found.starved:\n'
           "        top = cw.leading",
           "    if not found.starved:\n        top = cw.leading",
           ("tests/test_torchrl_workers.py::test_trainer_bound_workers_are_said_but_not_tuned",)),
    Mutant("site-advice-not-first", _VERDICT,
           "            found.advice.insert(0, first)\n            found.sampler_advice.append(first)\n"
           "            tune = []",
           "            found.advice.append(first)\n            found.sampler_advice.append(first)\n"
           "            tune = []",
           ("tests/test_run_sites.py::test_the_verdict_names_the_largest_site_first",)),
    Mutant("foreign-takes-the-wait-too", _VERDICT,
           "    theirs = inside <= 0", "    theirs = inside >= 0",
           ("tests/test_two_profilers.py",)),
    # -- a Ray job (issue 36): the runtime env merged, the records written home
    Mutant("ray-env-gyreprof-wins", "src/gyreprof/integrations/ray/job.py",
           "merged = {**dict(env_vars), **dict(given)}",
           "merged = {**dict(given), **dict(env_vars)}", ("tests/test_ray_job.py",)),
    Mutant("ray-hook-var-overridden", "src/gyreprof/integrations/ray/job.py",
           "    if _ray_hook_env() in given:\n        return out",
           "    if False:\n        return out", ("tests/test_ray_job.py",)),
    Mutant("ray-periodic-not-counted", "src/gyreprof/integrations/ray/job.py",
           'periodic += record.how == "ray-periodic"', "periodic += 0",
           ("tests/test_ray_job.py",)),
    Mutant("ray-record-overwrites-a-pid", "src/gyreprof/integrations/ray/job.py",
           "                or rec.done_path(run_dir, pid).exists()\n"
           "                or rec.start_path(run_dir, pid).exists()",
           "                or False", ("tests/test_ray_job.py",)),
    Mutant("serial-sparse-written", "src/gyreprof/model/_serial.py",
           "        if out.get(key) == value:\n            del out[key]",
           "        if False:\n            del out[key]", ("tests/test_render_json.py",)),
)
# fmt: on


# --------------------------------------------------------------------- checks


def occurrences(mutant: Mutant, root: Path = ROOT) -> int:
    """How many times the mutant's snippet occurs in its file (0 when the file is gone)."""
    p = root / mutant.path
    return p.read_text().count(mutant.original) if p.is_file() else 0


def stale_reason(mutant: Mutant, root: Path = ROOT) -> str | None:
    """Why the mutant cannot be applied as written, or None when it can."""
    if not (root / mutant.path).is_file():
        return f"{mutant.path} does not exist (moved?): update the table in tools/mutants.py"
    n = occurrences(mutant, root)
    if n == 1:
        return None
    where = "not found" if n == 0 else f"found {n} times"
    return (
        f"snippet {mutant.original!r} {where} in {mutant.path}: the code moved or changed; "
        "update this mutant's row in tools/mutants.py"
    )


# ------------------------------------------------------------------ copies


def _copy_tree(src_root: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    for name in COPIED:
        s = src_root / name
        if s.is_dir():
            # copy2 keeps mtimes: the build sees prebuilt extensions as up to date
            shutil.copytree(s, dest / name, ignore=_IGNORED, copy_function=shutil.copy2)
        elif s.is_file():
            shutil.copy2(s, dest / name)


# Runs the project's own setup.py with cythonize limited to the named extensions, so a
# mutant's build compiles one module with exactly the project's flags.
_BUILD_ONLY = """
import runpy, sys
import Cython.Build
only = set(sys.argv[1].split(","))
full = Cython.Build.cythonize
def some(exts, *a, **k):
    return full([e for e in exts if e.name.rsplit(".", 1)[-1] in only], *a, **k)
Cython.Build.cythonize = some
sys.argv = ["setup.py", "-q", "build_ext", "--inplace"]
runpy.run_path("setup.py", run_name="__main__")
"""
CORE = "src/gyreprof/_core"


def _modules(tree: Path) -> tuple[str, ...]:
    """The compiled core's extensions: one per .pyx."""
    return tuple(sorted(p.stem for p in (tree / CORE).glob("*.pyx")))


_CIMPORT = re.compile(r"^\s*(?:from\s+gyreprof\._core\.(\w+)\s+cimport|cimport\s+gyreprof\._core\.(\w+))",
                      re.MULTILINE)  # fmt: skip


def _cimports(tree: Path, stem: str) -> set[str]:
    """Core .pxd names that ``stem``'s .pyx and .pxd cimport (directly)."""
    found: set[str] = set()
    for ext in (".pyx", ".pxd"):
        f = tree / CORE / f"{stem}{ext}"
        if f.is_file():
            found.update(a or b for a, b in _CIMPORT.findall(f.read_text()))
    found.discard(stem)
    return found


def _modules_to_build(tree: Path, path: str) -> tuple[str, ...]:
    """Extensions a change to ``path`` needs rebuilt: its own module for a .pyx; for a
    .pxd, every module that cimports it, directly or through another .pxd."""
    name = Path(path).stem
    every = _modules(tree)
    if path.endswith(".pyx") and name in every:
        return (name,)
    needed = []
    for mod in every:
        seen: set[str] = set()
        todo = [mod]
        while todo:  # the .pxd files this module depends on, transitively
            for dep in _cimports(tree, todo.pop()) - seen:
                seen.add(dep)
                todo.append(dep)
        if mod == name or name in seen:
            needed.append(mod)
    return tuple(needed) or every


def _prebuilt_current(tree: Path) -> bool:
    """Every extension is built and newer than its own .pyx/.pxd and every .pxd it
    cimports, directly or not (a .pxd edit rebuilds only the modules that use it)."""
    core = tree / CORE
    for name in _modules(tree):
        seen, todo = {name}, [name]
        while todo:
            for dep in _cimports(tree, todo.pop()) - seen:
                seen.add(dep)
                todo.append(dep)
        sources = [core / f"{stem}{ext}" for stem in seen for ext in (".pyx", ".pxd")]
        newest = max((p.stat().st_mtime for p in sources if p.is_file()), default=0.0)
        built = list(core.glob(f"{name}.*.so")) + list(core.glob(f"{name}.*.pyd"))
        if not built or max(p.stat().st_mtime for p in built) < newest:
            return False
    return True


def _build(tree: Path, modules: Sequence[str], timeout_s: float) -> tuple[bool, str]:
    """Build only ``modules`` of the compiled core in ``tree`` (in place)."""
    env = dict(os.environ)
    env.pop("GYREPROF_ANNOTATE", None)
    try:
        r = subprocess.run(
            [sys.executable, "-c", _BUILD_ONLY, ",".join(modules)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return False, f"build timed out after {timeout_s:.0f} s"
    return r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def _run_tests(tree: Path, tests: Sequence[str], timeout_s: float) -> tuple[str, str]:
    """('passed' | 'failed' | 'timeout' | 'error', output tail)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "src")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        r = subprocess.run(
            [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return "timeout", f"tests ran past {timeout_s:.0f} s"
    out = (r.stdout + r.stderr)[-3000:]
    if r.returncode == 0:
        return "passed", out
    if r.returncode in (1, 2):  # test failures, or a collection/import error
        return "failed", out
    if r.returncode == 4 and re.search(r"^ERROR \S+\.py", out, re.MULTILINE):
        return "failed", out  # a test module that no longer imports: its node ids vanish
    return "error", out  # 3 internal error, 4 usage error, 5 nothing collected


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed, survived, stale, error, skipped
    detail: str
    seconds: float


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            return line.split(" - ")[0].removeprefix("FAILED ").removeprefix("ERROR ")
    return "tests failed"


def run_mutant(
    m: Mutant, base: Path, work: Path, timeout_s: float, deadline: float | None = None
) -> Result:
    t0 = time.monotonic()
    if deadline is not None and t0 >= deadline:
        return Result(m, "skipped", "the time budget (--budget-s) was spent before it started", 0.0)
    reason = stale_reason(m, base)
    if reason:
        return Result(m, "stale", reason, 0.0)
    tree = work / m.id
    try:
        _copy_tree(base, tree)
        target = tree / m.path
        target.write_text(target.read_text().replace(m.original, m.replacement, 1))
        if m.compiled:
            ok, log = _build(tree, _modules_to_build(tree, m.path), timeout_s)
            if not ok:
                return Result(m, "error", "the mutant does not build: " + log[-300:],
                              time.monotonic() - t0)  # fmt: skip
        outcome, out = _run_tests(tree, m.tests, timeout_s)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    dt = time.monotonic() - t0
    if outcome == "failed":
        return Result(m, "killed", _first_failure(out), dt)
    if outcome == "timeout":
        return Result(m, "killed", out, dt)
    if outcome == "passed":
        return Result(m, "survived", "all of " + " ".join(m.tests) + " passed", dt)
    return Result(m, "error", "pytest could not run the selection: " + out[-300:], dt)


# ------------------------------------------------------------------- main


# ---------------------------------------------------------------- selection


def changed_files(base: str, root: Path = ROOT) -> set[str]:
    """Paths (relative to ``root``) that differ between commit ``base`` and the working
    tree, committed or not, plus untracked files. Raises ValueError when git cannot
    answer (not a repository, unknown commit)."""
    out: set[str] = set()
    for argv in (
        ["git", "diff", "--name-only", "--no-renames", base, "--"],
        ["git", "ls-files", "--others", "--exclude-standard"],
    ):
        try:
            r = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"git could not list the changed files: {exc}") from exc
        if r.returncode != 0:
            raise ValueError(f"git could not list the files changed since {base!r}: "
                             f"{r.stderr.strip() or r.stdout.strip()}")  # fmt: skip
        out.update(line.strip() for line in r.stdout.splitlines() if line.strip())
    return out


def touched_by(m: Mutant, files: set[str]) -> bool:
    """Whether a change to ``files`` touches mutant ``m``: its source file or a test
    file it names (a node id counts by its file)."""
    return m.path in files or any(t.split("::")[0] in files for t in m.tests)


def select(
    mutants: Sequence[Mutant],
    *,
    only: Sequence[str] | None = None,
    changed: set[str] | None = None,
    sample: int | None = None,
    seed: str = "0",
) -> list[Mutant]:
    """The mutants to run, in table order.

    ``only``: exactly these ids. Otherwise every row, or, with ``changed`` and/or
    ``sample``: the rows ``changed`` touches (see :func:`touched_by`) and ``sample``
    rows drawn from the others with ``seed`` (all of them when fewer are left). The
    draw depends only on the seed and the ids of the rows it draws from, not on their
    order in the table.
    """
    if only:
        return [m for m in mutants if m.id in set(only)]
    if changed is None and sample is None:
        return list(mutants)
    picked = {m.id for m in mutants if changed is not None and touched_by(m, changed)}
    if sample:
        rest = sorted(m.id for m in mutants if m.id not in picked)
        picked.update(random.Random(seed).sample(rest, min(sample, len(rest))))
    return [m for m in mutants if m.id in picked]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python tools/mutants.py",
        description="Apply one-line mutants to temporary copies and check the tests catch them.",
    )
    ap.add_argument("--list", action="store_true", help="print the mutant table and exit")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run only these mutants")
    ap.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    ap.add_argument(
        "--threshold", type=float, default=0.95, help="lowest passing kill rate (default 0.95)"
    )
    ap.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S,
        help="seconds per build or test run; a test run past it counts as killed",
    )  # fmt: skip
    ap.add_argument(
        "--no-baseline", action="store_true",
        help="skip running the selected tests on the unmutated copy first",
    )  # fmt: skip
    ap.add_argument(
        "--changed", metavar="BASE",
        help="run the rows whose source or test files changed since commit BASE",
    )  # fmt: skip
    ap.add_argument(
        "--sample", type=int, metavar="N",
        help="run N rows drawn by --seed (with --changed: N rows besides the changed ones)",
    )  # fmt: skip
    ap.add_argument("--seed", default="0", help="the seed of --sample (any string; default 0)")
    ap.add_argument(
        "--budget-s", type=float, metavar="S",
        help="start no mutant after S seconds; those left are SKIPPED, not counted",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.only and (args.changed is not None or args.sample is not None):
        ap.error("--only picks the rows itself: not with --changed or --sample")
    if args.sample is not None and args.sample < 1:
        ap.error(f"--sample must be >= 1, got {args.sample}")
    if args.budget_s is not None and not args.budget_s > 0:
        ap.error(f"--budget-s must be > 0, got {args.budget_s}")
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    if not 0.0 <= args.threshold <= 1.0:
        ap.error(f"--threshold must be in 0..1, got {args.threshold}")
    if args.timeout <= 0:
        ap.error(f"--timeout must be > 0, got {args.timeout}")
    known = {m.id for m in MUTANTS}
    unknown = [i for i in args.only or () if i not in known]
    if unknown:
        ap.error(f"unknown mutant id(s) {unknown}; see --list for the ids")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.list:
        for m in MUTANTS:
            flag = "" if stale_reason(m) is None else "  [STALE]"
            print(f"{m.id:34} {m.path}{flag}")
            print(f"{'':34}   - {m.original!r}\n{'':34}   + {m.replacement!r}")
            print(f"{'':34}   tests: {' '.join(m.tests)}")
        return 0
    t_start = time.monotonic()
    try:
        changed = None if args.changed is None else changed_files(args.changed)
    except ValueError as exc:
        print(f"--changed: {exc}", file=sys.stderr)
        return 2
    chosen = select(MUTANTS, only=args.only, changed=changed, sample=args.sample,
                    seed=args.seed)  # fmt: skip
    print(f"{len(chosen)} of {len(MUTANTS)} mutants: {' '.join(m.id for m in chosen)}", flush=True)
    if not chosen:
        print(f"no mutant touches the files changed since {args.changed}: nothing to run")
        return 0
    deadline = None if args.budget_s is None else t_start + args.budget_s
    with tempfile.TemporaryDirectory(prefix="gyreprof-mutants-") as tmp:
        work = Path(tmp)
        base = work / "_base"
        _copy_tree(ROOT, base)
        if not _prebuilt_current(base):  # a fresh or outdated checkout: build it once
            print("building the compiled core once for all mutants ...", flush=True)
            ok, log = _build(base, _modules(base), args.timeout)
            if not ok:
                print(f"the unmutated tree does not build:\n{log}", file=sys.stderr)
                return 2
        if not args.no_baseline:
            tests = list(dict.fromkeys(t for m in chosen for t in m.tests))
            outcome, out = _run_tests(base, tests, args.timeout * 2)
            if outcome != "passed":
                print(f"the tests fail without any mutant ({outcome}); fix that first:\n{out}",
                      file=sys.stderr)  # fmt: skip
                return 2
            print(f"baseline: the {len(tests)} test selections pass on the unmutated copy "
                  f"({time.monotonic() - t_start:.0f} s)")  # fmt: skip
        results: list[Result] = []
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [
                pool.submit(run_mutant, m, base, work, args.timeout, deadline) for m in chosen
            ]
            for fut in as_completed(futures):
                r = fut.result()
                results.append(r)
                print(f"{r.status.upper():9} {r.mutant.id:34} {r.seconds:5.1f} s  {r.detail}",
                      flush=True)  # fmt: skip
    order = {m.id: i for i, m in enumerate(MUTANTS)}
    results.sort(key=lambda r: order[r.mutant.id])
    counted = [r for r in results if r.status in ("killed", "survived")]
    killed = sum(r.status == "killed" for r in counted)
    stale = [r for r in results if r.status == "stale"]
    errors = [r for r in results if r.status == "error"]
    skipped = [r for r in results if r.status == "skipped"]
    rate = killed / len(counted) if counted else 0.0
    print()
    for r in results:
        if r.status != "killed":
            print(f"{r.status.upper():9} {r.mutant.id}: {r.detail}")
    print(
        f"kill rate: {killed}/{len(counted)} = {rate:.1%} (threshold {args.threshold:.0%}); "
        f"{len(stale)} stale, {len(errors)} errors, {len(skipped)} skipped; "
        f"{time.monotonic() - t_start:.0f} s"
    )
    if stale or errors or not counted or rate < args.threshold:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
