"""Added cost of the HTTP rollout instrumentation per request and per streamed chunk.

    PYTHONPATH=src python benchmarks/bench_http.py [--rounds 15] [--n 300]
    PYTHONPATH=src python benchmarks/bench_http.py --run-loop 300 --rounds 5

Against the local OpenAI-compatible test server (tests/helpers/llm_server.py, run
in a subprocess so it does not share this interpreter's GIL), and against an
in-memory transport (httpx.MockTransport: no network, so the added microseconds
are not buried in the round trip). Each round times the bare client (the
patched method's ``__wrapped__``, the same request objects) and the instrumented
one back to back, alternating which goes first; the figure is the median over
rounds of (instrumented - bare) per request, in microseconds, and the ratio.

``--instructions [--before OTHER_SRC] [--seeds K]``: callgrind's instruction counts per request
(httpx and requests against the local server) and per streamed chunk, bare and
instrumented; the row ``trains`` is the instrumented client on a thread that trains
(it took an optimizer step's update signal first), where a request is a wait inside
the step: the "this tree" row is the default trainer's, where each request also
closes a collect block. ``--seeds K`` counts each row in K children (hash seeds 0..K-1)
and prints the median of the per-seed differences and their range.

``--clients`` picks the rows of ``--instructions`` (default ``httpx,requests,chunks``;
``openai`` adds the SDK's ``chat.completions.create``, on httpx; ``async`` an
``httpx.AsyncClient`` send awaited in an event loop, as an asyncio trainer does: its
"trains" row pays the loop's wait rule, ``integrations._auto.loop_wait``).

``--run-instructions N [--seeds K]``: the openai-SDK loop of ``--run-loop`` counted
instead of timed: its process under callgrind, bare and under ``gyreprof run`` (the
launcher outside valgrind), 2N - N over N, the median of the per-seed differences.
Every part of the run that the loop's process pays is in it (the patches, the trainer's
bookkeeping, the rollout flusher's thread); no load on the machine moves it.

``--breakdown CLIENT [--top K]``: where the added instructions of one client's request
go (httpx or requests): callgrind collects only inside the 2N loop (``filter_next``), bare
and instrumented, and the K functions whose exclusive counts grew most are printed per
request (names with a recursion suffix, ``'2``, shift between levels: read them in pairs).

``--wrap``: a method call through a pass-through wrapper: bare, wrapt's
``FunctionWrapper`` and the plain function ``Patches.wrap(..., hot=True)`` installs.

``--run-loop N``: an openai-SDK client loop of N sequential chat completions, bare
(``python loop.py``) and under ``gyreprof run`` in turn; the median ratios of the
whole command's wall and CPU time (user + system of it and its children) and of the
loop's own wall and CPU time (as the loop measures them).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # _callgrind

BODY = {"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 4}


def _start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "helpers.llm_server"],
        cwd=ROOT / "tests",
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _pair(bare: Callable[[], object], inst: Callable[[], object], n: int, rounds: int) -> str:
    diffs = []
    ratios = []
    bare_best: list[float] = []
    inst_best: list[float] = []
    for r in range(rounds):
        times = {}
        order = (("bare", bare), ("inst", inst)) if r % 2 else (("inst", inst), ("bare", bare))
        for name, fn in order:
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn()
            times[name] = (time.perf_counter_ns() - t0) / n
        bare_best.append(times["bare"])
        inst_best.append(times["inst"])
        diffs.append((times["inst"] - times["bare"]) / 1000.0)
        ratios.append(times["inst"] / times["bare"])
    d = statistics.median(diffs)
    q = statistics.quantiles(diffs, n=4)
    best = (min(inst_best) - min(bare_best)) / 1000.0
    return (
        f"median {d:+.2f} us per call (quartiles {q[0]:+.2f} .. {q[2]:+.2f}), "
        f"ratio {statistics.median(ratios):.4f}; best of rounds {best:+.2f} us "
        f"({min(bare_best) / 1000.0:.1f} -> {min(inst_best) / 1000.0:.1f} us)"
    )


def _bookkeeping(httpx: object) -> None:
    """The instrumentation's own work, timed alone (no network noise): what a plain
    httpx send adds around the original call (the Python plain path, and the general path
    a streamed or SDK request takes), what one streamed chunk adds, and the body scan
    (compiled, against its pure-Python reference twin) at realistic answer sizes."""
    import json
    import timeit

    import httpx as hx

    from gyreprof._core.bodyscan import scan_body
    from gyreprof.integrations._auto import rollout_log as rl
    from gyreprof.integrations.http import httpx as hxi

    from helpers.body_scan_reference import scan_body_reference

    body = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "tok tok tok"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
    }
    mock = hx.Client(transport=hx.MockTransport(lambda req: hx.Response(200, json=body)))
    req = mock.build_request("POST", "http://mock/v1/chat/completions", json=BODY)
    resp = type(mock).send.__wrapped__(mock, req)  # type: ignore[attr-defined]
    n = 200  # short repeats, many of them: the best one is a slice the machine left alone

    def best(fn: Callable[[], object]) -> float:
        return min(timeit.repeat(fn, number=n, repeat=300)) / n * 1e6

    def answered(*args: object, **kwargs: object) -> object:
        return resp

    def plain() -> None:
        hxi._plain.plain(answered, req, (req,), {})

    def general() -> None:
        r = hxi.open_request(req)
        hxi.done(r, resp, False, hx)

    chunk = b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "tok "}}]}\n\n'
    stream_req = rl.Request("http://mock:80/v1/chat/completions", "httpx")
    print(
        f"bookkeeping per plain httpx request (PlainSend, the row, the wait): {best(plain):.2f} us"
    )
    print(
        f"bookkeeping per httpx request, general path (open + answer + finish): {best(general):.2f} us"
    )
    print(
        f"bookkeeping per streamed chunk (Request.chunk): {best(lambda: stream_req.chunk(chunk)):.2f} us"
    )
    text = "tok " * 8
    for label, k in (("a chat answer", 1), ("16 choices", 16), ("256 choices", 256)):
        data = json.dumps(
            {**body, "choices": [{"index": i, "message": {"content": text}} for i in range(k)]}
        ).encode()
        c = best(lambda d=data: scan_body(d, rl.BODY_CAP))
        p = best(lambda d=data: scan_body_reference(d))
        print(
            f"body scan, {label} ({len(data)} bytes): compiled {c:.2f} us, "
            f"Python reference {p:.2f} us"
        )


def _chunk_costs() -> None:
    """A streamed chunk's bookkeeping (``Request.chunk``: the times, and the token scan
    carried over from chunk to chunk, ``StreamScan.feed``) against the scan it replaced
    (issue 34: each chunk searched on its own, so a number cut between two chunks was
    read short), on OpenAI-style chat completion chunks: a content event, the final
    usage event, and 16 KiB of events read at once."""
    import json
    import re
    import timeit

    from gyreprof._core.bodyscan import StreamScan
    from gyreprof.integrations._auto import rollout_log as rl

    num = re.compile(rb"\s*:\s*(\d{1,12})")
    choices = re.compile(rb'"choices"\s*:\s*\[\s*(\]?)')

    def number(body: bytes, key: bytes) -> int:
        i = body.find(key)
        if i < 0:
            return -1
        m = num.match(body, i + len(key))
        return int(m.group(1)) if m else -1

    def before(data: bytes, state: list[Any]) -> None:  # the per-chunk scan of issue 23
        if not state[0] and b'"choices"' in data:
            for found in choices.finditer(data):
                if not found.group(1):
                    state[0] = True
                    break
        if b"_tokens" in data:
            p = number(data, b'"prompt_tokens"')
            if p >= 0:
                state[1] = p
            c = number(data, b'"completion_tokens"')
            if c >= 0:
                state[2] = c

    event = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
             "model": "tiny", "choices": [{"index": 0, "delta": {"content": "tok "},
                                           "finish_reason": None}]}  # fmt: skip
    usage = {**event, "choices": [], "usage": {"prompt_tokens": 31,
             "completion_tokens": 611178002, "total_tokens": 611178033}}  # fmt: skip
    content = f"data: {json.dumps(event)}\n\n".encode()
    last = f"data: {json.dumps(usage)}\n\n".encode()
    big = content * (16384 // len(content))
    n = 200

    def best(fn: Callable[[], object]) -> float:
        return min(timeit.repeat(fn, number=n, repeat=300)) / n * 1e6

    req = rl.Request("http://mock:80/v1/chat/completions", "httpx")
    scan = StreamScan()
    state: list[Any] = [False, -1, -1]
    for label, data in (("content event", content), ("usage event", last), ("16 KiB", big)):
        print(
            f"per chunk, {label} ({len(data)} bytes): Request.chunk {best(lambda d=data: req.chunk(d)):.2f} us; "
            f"StreamScan.feed {best(lambda d=data: scan.feed(d)):.2f} us; "
            f"the per-chunk scan it replaced {best(lambda d=data: before(d, state)):.2f} us"
        )


def _server_metrics_costs() -> None:
    """What reading a rollout server's metrics page costs the reader thread (issue 34):
    one read of a vLLM-format page (the test server's, 1 and 8 engines; the HTTP GET on
    127.0.0.1 and the parse of the recognised lines), and a request's bookkeeping when
    its answer carries a per-request ``metrics`` object, against one without."""
    import json
    import timeit

    from gyreprof.integrations._auto import rollout_log as rl
    from gyreprof.integrations.http import server_metrics as smi

    from helpers.metrics_server import MetricsServer

    def best(fn: Callable[[], object], number: int = 20) -> float:
        return min(timeit.repeat(fn, number=number, repeat=30)) / number * 1e6

    for engines in (1, 8):
        with MetricsServer(engines=engines) as srv:
            url = srv.url + "/metrics"
            text = smi.fetch(url)
            print(
                f"metrics page, {engines} engine(s) ({len(text.splitlines())} lines, "
                f"{len(text)} bytes): parse {best(lambda t=text: smi.parse(t)):.0f} us, "
                f"GET + parse {best(lambda u=url: smi.parse(smi.fetch(u))):.0f} us"
            )
    log = rl.thread_log()
    answer = {"id": "cmpl-1", "object": "chat.completion",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "tok tok"}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}  # fmt: skip
    timed = {**answer, "metrics": {"queued_time": 0.01, "prefill_time": 0.002,
                                   "decode_time": 0.3, "e2e_latency": 0.32}}  # fmt: skip
    ep = "http://h:1/v1/chat/completions"
    for label, body in (("no metrics object", answer), ("a metrics object", timed)):
        data = json.dumps(body).encode()

        def one(d: bytes = data) -> None:
            start, retried = log.open_plain(ep)
            log.record_plain(ep, "httpx", start, retried, "ok", d, 100)

        print(
            f"a plain request's row (open_plain + record_plain), {label}: {best(one, 200):.2f} us"
        )


LOOP = """
import sys, time, openai
sdk = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="x", max_retries=0)
n = int(sys.argv[2])
msgs = [{"role": "user", "content": "a b c"}]
sdk.chat.completions.create(model="m", messages=msgs, max_tokens=4)
w, c = time.perf_counter(), time.process_time()
for _ in range(n):
    sdk.chat.completions.create(model="m", messages=msgs, max_tokens=4)
print("loop", time.perf_counter() - w, time.process_time() - c, flush=True)
"""


def _run_loop(url: str, n: int, rounds: int) -> None:
    import os
    import resource
    import tempfile

    script = Path(tempfile.mkdtemp()) / "loop.py"
    script.write_text(LOOP)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bare = [sys.executable, str(script), url, str(n)]
    inst = [sys.executable, "-m", "gyreprof", "run", "--", *bare]
    ratios: dict[str, list[float]] = {k: [] for k in ("wall", "cpu", "loop wall", "loop cpu")}
    for r in range(rounds):
        got = {}
        for name, argv in (
            (("bare", bare), ("inst", inst))
            if r % 2
            else (
                ("inst", inst),
                ("bare", bare),
            )
        ):
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
            wall = time.perf_counter() - t0
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
            line = next(x for x in out.stdout.splitlines() if x.startswith("loop "))
            lw, lc = (float(x) for x in line.split()[1:3])
            got[name] = (wall, cpu, lw, lc)
        for i, k in enumerate(ratios):
            ratios[k].append(got["inst"][i] / got["bare"][i])
    print(f"gyreprof run, openai-SDK loop of {n} requests, {rounds} rounds (inst / bare):")
    for k, v in ratios.items():
        print(
            f"  {k:10s} median {statistics.median(v):.3f}  (all: {', '.join(f'{x:.3f}' for x in v)})"
        )


def _run_instructions(url: str, n: int, seeds: int) -> None:
    """The openai-SDK loop's instructions per request (``_COUNT_CHILD``'s ``openai``
    client, its collector left as a program has it: the objects gyreprof keeps are walked
    by every full collection, part of what the run costs), bare and under ``gyreprof run``
    (the loop's process under callgrind, the launcher outside it): the median of the
    per-seed differences."""
    src = str(ROOT / "src")
    bare = [_count("openai", "loop", n, url, src, seed=s)[0] for s in range(seeds)]
    run = [_count("openai", "loop", n, url, src, seed=s, launcher=True)[0] for s in range(seeds)]
    added = [r - b for r, b in zip(run, bare, strict=True)]
    med = statistics.median(bare)
    print(f"openai-SDK loop, instructions per request (callgrind, N = {n}, {seeds} seed(s)):")
    print(
        f"  bare {med:.0f}  under gyreprof run {statistics.median(run):.0f}  added"
        f" {statistics.median(added):+.0f} ({statistics.median(added) / med:+.2%};"
        f" seeds {min(added):+.0f} .. {max(added):+.0f})"
    )


# ------------------------------------------------------------ instruction counts

_COUNT_CHILD = """
import itertools, sys, time
client, mode, n, url = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if mode in ("inst", "train"):
    from gyreprof.integrations import http
    prof = http.profile()
import httpx
BODY = {"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 4}
if client == "httpx":
    c = httpx.Client(base_url=url)
    req = c.build_request("POST", "/v1/chat/completions", json=BODY)
    def one(_):
        c.send(req)
elif client == "requests":
    import requests
    s = requests.Session()
    prep = s.prepare_request(requests.Request("POST", url + "/v1/chat/completions", json=BODY))
    def one(_):
        s.send(prep)
elif client == "async":  # one AsyncClient request a run of the loop, as a trainer awaits
    import asyncio
    loop = asyncio.new_event_loop()
    ac = httpx.AsyncClient(base_url=url)
    req = ac.build_request("POST", "/v1/chat/completions", json=BODY)
    def one(_):
        loop.run_until_complete(ac.send(req))
elif client == "openai":
    import openai
    sdk = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    def one(_):
        sdk.chat.completions.create(model="m", **BODY)
else:  # "chunks": one in-memory stream (the same bytes each time) of n chunks per call
    chunk = b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "tok "}}]}\\n\\n'
    k = n
    n = 2
    c = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=iter([chunk] * k))))
    req = c.build_request("POST", "http://mock/v1/chat/completions", json=BODY)
    def one(_):
        r = c.send(req, stream=True)
        for _ in r.iter_raw():
            pass
        r.close()
rep = itertools.repeat
for _ in range(20 if client != "chunks" else 2):
    one(None)
if mode == "train":  # the thread trains (an optimizer step's update signal): each request is
    # then a wait inside the step, not a collect block of the default trainer's own
    from gyreprof.integrations._auto import state as st
    t = st.thread_state()
    st.update_signal(t, t.now())
    one(None)
# the start-up's objects out of the collector's reach: a full collection of them landing in
# one of the two loops and not the other moved the figure by tens of thousands per request
import gc
if mode != "loop":  # "loop": a program as it runs, its collector walking what it holds
    gc.collect()
    gc.freeze()
t0 = time.process_time_ns()
list(map(one, rep(None, n)))                      # N: callgrind's map_next, inclusive
t1 = time.process_time_ns()
list(filter(one, rep(None, 2 * n)))               # 2N: filter_next, inclusive
t2 = time.process_time_ns()
print("cpu_ns", t1 - t0, t2 - t1, file=sys.stderr)
"""


def _count(
    client: str,
    mode: str,
    n: int,
    url: str,
    src: str,
    valgrind: bool = True,
    seed: int = 0,
    launcher: bool = False,
) -> tuple[float, float]:
    """Instructions (or, without valgrind, CPU ns) per call of the loop's body: the
    difference of 2N and N calls over N (start-up and warm-up are outside both).
    ``seed``: the child's PYTHONHASHSEED (another seed, another heap layout);
    ``launcher``: the child (under callgrind) runs under ``gyreprof run``."""
    import os
    import re
    import tempfile

    from _callgrind import VALGRIND, inclusive

    env = {
        **os.environ,
        "PYTHONHASHSEED": str(seed),
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": src,
    }
    child = [sys.executable, "-c", _COUNT_CHILD, client, mode, str(n), url]
    if not valgrind:
        out = subprocess.run(child, capture_output=True, text=True, env=env, check=True)
        a, b = (int(x) for x in re.findall(r"cpu_ns (\d+) (\d+)", out.stderr)[0])
        return (b - a) / n, float(a + b)
    with tempfile.TemporaryDirectory() as d:
        cg = f"{d}/cg.out"
        cmd = [*VALGRIND, f"--callgrind-out-file={cg}", *child]
        if launcher:
            cmd = [sys.executable, "-m", "gyreprof", "run", "--startup-timeout", "0", "--", *cmd]
        subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        got = inclusive(cg, ("map_next", "filter_next"), f"{client} {mode}")
    return (got["filter_next"] - got["map_next"]) / n, float(got["map_next"])


def _instructions(
    url: str,
    n: int,
    chunks: int,
    before: str | None,
    seeds: int = 1,
    clients: tuple[str, ...] | list[str] = ("httpx", "requests", "chunks"),
) -> None:
    """Per call, bare and instrumented, each counted in ``seeds`` children of their own
    (hash seeds 0..seeds-1, the same seeds for both): one child's count moves with its heap
    layout by more than requests' added cost (obmalloc's bookkeeping, the eval loop), so
    with several seeds the row is the median of the per-seed differences, with their
    range."""
    src = str(ROOT / "src")
    print(
        f"instructions per call (callgrind, 2N - N over N, N = {n}; chunks: {chunks} a stream;"
        f" {seeds} hash seed(s))"
    )
    for client in clients:
        k = chunks if client == "chunks" else n
        per = 1 if client != "chunks" else 2  # 2N - N = two streams of k chunks
        bare = [_count(client, "bare", k, url, src, seed=s)[0] / per for s in range(seeds)]
        trees = [("this tree", src, "inst")] + ([("before", before, "inst")] if before else [])
        if client != "chunks":  # on a thread that trains, as in an RL loop
            trees.append(("trains", src, "train"))
            if before:
                trees.append(("b. trains", before, "train"))
        for name, tree, mode in trees:
            inst = [_count(client, mode, k, url, tree, seed=s)[0] / per for s in range(seeds)]
            added = [i - b for i, b in zip(inst, bare, strict=True)]
            unit = "request" if per == 1 else "chunk"
            spread = f" (seeds: {min(added):+.0f} .. {max(added):+.0f})" if seeds > 1 else ""
            print(
                f"  {client:8s} {name:9s} bare {statistics.median(bare):9.0f}  instrumented "
                f"{statistics.median(inst):9.0f}  added {statistics.median(added):+8.0f} per "
                f"{unit}{spread}"
            )


def _cpu_ratio(url: str, n: int, rounds: int) -> None:
    """ns of CPU time per instruction of the bare client (this machine, now), and the
    instrumented / bare CPU time per request of interleaved runs."""
    src = str(ROOT / "src")
    for client in ("httpx", "requests"):
        ratios = []
        ns = []
        for r in range(rounds):
            got = {}
            for mode in ("bare", "inst") if r % 2 else ("inst", "bare"):
                got[mode] = _count(client, mode, n, url, src, valgrind=False)[0]
            ratios.append(got["inst"] / got["bare"])
            ns.append(got["bare"])
        print(
            f"  {client:8s} CPU ns per bare request median {statistics.median(ns):.0f}; "
            f"inst / bare median {statistics.median(ratios):.4f} "
            f"(all: {', '.join(f'{x:.3f}' for x in ratios)})"
        )


def _breakdown(url: str, client: str, n: int, top: int) -> None:
    import os
    import re
    import tempfile

    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(ROOT / "src")
    per: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as d:
        for mode in ("bare", "inst"):
            cg = f"{d}/{mode}.out"
            child = [sys.executable, "-c", _COUNT_CHILD, client, mode, str(n), url]
            cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=filter_next"]
            subprocess.run([*cmd, f"--callgrind-out-file={cg}", *child], env=env, check=True,
                           capture_output=True)  # fmt: skip
            ann = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", cg],
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
            rows = {}
            for line in ann.splitlines():
                m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)", line)
                if m and "PROGRAM TOTALS" not in line:
                    rows[m.group(2).split(" [")[0]] = int(m.group(1).replace(",", ""))
            per[mode] = rows
    calls = 2 * n
    total = (sum(per["inst"].values()) - sum(per["bare"].values())) / calls
    print(f"{client}: {total:+.0f} instructions per request added (2N = {calls} requests)")
    keys = set(per["bare"]) | set(per["inst"])
    grew = sorted(keys, key=lambda k: per["inst"].get(k, 0) - per["bare"].get(k, 0))
    for k in grew[::-1][:top]:
        print(f"  {(per['inst'].get(k, 0) - per['bare'].get(k, 0)) / calls:+8.0f}  {k[-110:]}")


def _wrap_cost(rounds: int) -> None:
    """A pass-through wrapper's cost per call of a method: bare, wrapt's
    ``FunctionWrapper`` (``Patches.wrap``) and the plain function of ``hot=True``
    (best of ``rounds`` repeats of 20,000 calls, ns a call)."""
    import timeit

    from gyreprof.integrations._instrument import Patches

    def through(wrapped: Callable[..., object], instance: object, args: tuple[object, ...],
                kwargs: dict[str, object]) -> object:  # fmt: skip
        return wrapped(*args, **kwargs)

    def make() -> type:
        class Conn:
            def request(self, method: object, url: object, body: object = None,
                        **kw: object) -> object:  # fmt: skip
                return url

        return Conn

    bare, cold, hot = make(), make(), make()
    Patches().wrap(cold, "request", through)
    Patches().wrap(hot, "request", through, hot=True)
    n = 20000
    for name, cls in (("bare", bare), ("wrapt FunctionWrapper", cold), ("hot function", hot)):
        obj = cls()
        t = min(timeit.repeat(lambda o=obj: o.request("GET", "/", body=b"", x=1), number=n,
                              repeat=rounds)) / n * 1e9  # fmt: skip
        print(f"  {name:22s} {t:6.0f} ns a call")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument(
        "--server-metrics",
        action="store_true",
        help="only a metrics page's read and parse, and a request's per-request metrics",
    )
    ap.add_argument(
        "--chunks-only",
        action="store_true",
        help="only a streamed chunk's bookkeeping and token scan, against the scan it replaced",
    )
    ap.add_argument("--run-loop", type=int, default=0, help="openai loop under gyreprof run")
    ap.add_argument(
        "--run-instructions", type=int, default=0, help="the same loop's N, callgrind counts"
    )
    ap.add_argument("--instructions", action="store_true", help="callgrind counts per call")
    ap.add_argument("--before", default=None, help="with --instructions: another tree's src")
    ap.add_argument("--seeds", type=int, default=1, help="with --instructions: hash seeds")
    ap.add_argument("--cpu", action="store_true", help="interleaved CPU time per request")
    ap.add_argument("--clients", default="httpx,requests,chunks", help="with --instructions")
    ap.add_argument("--breakdown", choices=("httpx", "requests"), help="added cost by function")
    ap.add_argument("--top", type=int, default=25, help="with --breakdown: functions shown")
    ap.add_argument("--wrap", action="store_true", help="a pass-through wrapper's cost a call")
    args = ap.parse_args()
    if args.wrap:
        print("a method call through a pass-through wrapper:")
        _wrap_cost(max(args.rounds, 5))
        return
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, got {args.seeds}")
    unknown = set(args.clients.split(",")) - {"httpx", "requests", "chunks", "openai", "async"}
    if unknown:
        ap.error(f"--clients: unknown {', '.join(sorted(unknown))}")
    if args.instructions or args.cpu or args.breakdown:
        proc, url = _start_server()
        try:
            if args.breakdown:
                _breakdown(url, args.breakdown, args.n, args.top)
            if args.instructions:
                _instructions(
                    url, args.n, args.chunks, args.before, args.seeds, args.clients.split(",")
                )
            if args.cpu:
                _cpu_ratio(url, args.n, args.rounds)
        finally:
            proc.terminate()
            proc.wait(10)
        return
    if args.run_loop or args.run_instructions:
        proc, url = _start_server()
        try:
            if args.run_instructions:
                _run_instructions(url, args.run_instructions, args.seeds)
            if args.run_loop:
                _run_loop(url, args.run_loop, args.rounds)
        finally:
            proc.terminate()
            proc.wait(10)
        return

    if args.chunks_only:
        _chunk_costs()
        return
    if args.server_metrics:
        _server_metrics_costs()
        return

    import httpx
    import requests

    from gyreprof.integrations import http

    prof = http.profile()  # patches the clients; records everything below
    _bookkeeping(httpx)
    proc, url = _start_server()
    try:
        # httpx against an in-memory transport: the wrapper's own cost
        mock = httpx.Client(
            transport=httpx.MockTransport(
                lambda req: httpx.Response(
                    200, json={"choices": [{"text": "x"}], "usage": {"prompt_tokens": 3}}
                )
            )
        )
        req = mock.build_request("POST", "http://mock/v1/chat/completions", json=BODY)
        bare_send = type(mock).send.__wrapped__  # type: ignore[attr-defined]
        print(
            "httpx, in-memory transport:",
            _pair(lambda: bare_send(mock, req), lambda: mock.send(req), 50, args.rounds * 20),
        )

        c = httpx.Client(base_url=url)
        req = c.build_request("POST", "/v1/chat/completions", json=BODY)
        print(
            "httpx, local server:       ",
            _pair(lambda: bare_send(c, req), lambda: c.send(req), args.n, args.rounds),
        )

        s = requests.Session()
        prepared = s.prepare_request(
            requests.Request("POST", url + "/v1/chat/completions", json=BODY)
        )
        bare_rsend = requests.Session.send.__wrapped__  # type: ignore[attr-defined]
        print(
            "requests, local server:    ",
            _pair(lambda: bare_rsend(s, prepared), lambda: s.send(prepared), args.n, args.rounds),
        )

        sreq = c.build_request(
            "POST", "/v1/chat/completions", json={"stream": True, "max_tokens": args.chunks}
        )

        def stream(send: Callable[..., httpx.Response]) -> Callable[[], None]:
            def run() -> None:
                r = send(sreq, stream=True)
                try:
                    for _ in r.iter_raw():
                        pass
                finally:
                    r.close()

            return run

        per = _pair(
            stream(lambda q, **kw: bare_send(c, q, **kw)),
            stream(lambda q, **kw: c.send(q, **kw)),
            1,
            args.rounds * 2,
        )
        print(f"httpx stream of {args.chunks} chunks (per stream): {per}")
        print("  (divide the per-stream figure by the chunk count for the cost per chunk)")
    finally:
        proc.terminate()
        proc.wait(10)
        prof.close()


if __name__ == "__main__":
    main()
