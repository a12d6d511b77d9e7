"""The rollouts of a ``gyreprof run --save DIR`` read again by ``gyreprof report DIR``
(text, JSON, Markdown, HTML), the Markdown run report (rollouts and the user's own
tables, checked with a real Markdown parser), and cloud metadata probes kept out of
the rollouts: real ``gyreprof run`` subprocesses and real clients against the local
server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("openai")
pytest.importorskip("requests")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from gyreprof.analysis import rollouts as ar  # noqa: E402
from gyreprof.render import markdown as render_markdown  # noqa: E402

from helpers.llm_server import LLMServer  # noqa: E402
from helpers.run_scripts.runhelp import check_format, gyreprof_run, printed, script  # noqa: E402
from helpers.spans import span_row  # noqa: E402

BATCHES = 2


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


def _section(text: str) -> list[str]:
    """The lines of the text report's rollouts section."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rollout requests ("))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


def _tables(md: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of a Markdown text as (headers, rows), read by markdown-it's parser."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    out: list[tuple[list[str], list[list[str]]]] = []
    row: list[str] | None = None
    head: list[str] = []
    rows: list[list[str]] = []
    where = ""
    for t in tokens:
        if t.type == "table_open":
            head, rows = [], []
        elif t.type in ("thead_open", "tbody_open"):
            where = t.type
        elif t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append("".join(c.content for c in (t.children or [])))
        elif t.type == "tr_close" and row is not None:
            if where == "thead_open":
                head.extend(row)
            else:
                rows.append(row)
            row = None
        elif t.type == "table_close":
            out.append((head, rows))
    return out


def _headings(md: str) -> list[str]:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(md)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def test_report_of_a_saved_run_shows_its_rollouts(tmp_path: Path) -> None:
    pytest.importorskip("markdown_it")
    save = tmp_path / "saved"
    with LLMServer() as srv:
        proc, data = gyreprof_run(
            tmp_path,
            script("http_rollouts.py"),
            srv.url,
            str(BATCHES),
            options=("--save", str(save)),
            timeout=240,
        )
        log = srv.wait_logged(BATCHES * 10)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None and data["rollouts"] is not None, proc.stderr[-4000:]
    assert printed(proc.stdout, "requests") == BATCHES * 10 == len(log)
    run_section = _section(proc.stdout + "\n" + proc.stderr)
    assert run_section[0] == f"rollout requests ({BATCHES * 10} over 2 endpoint(s)):"

    text = _report(str(save))
    assert text.returncode == 0, text.stderr[-3000:]
    assert _section(text.stdout) == run_section  # the same section, figure for figure

    js = _report(str(save), "--json")
    assert js.returncode == 0, js.stderr[-3000:]
    again = json.loads(js.stdout)
    check_format(again)
    assert again["rollouts"] == data["rollouts"]
    assert [n for n in again["notes"] if n.startswith("rollouts:")] == [
        n for n in data["notes"] if n.startswith("rollouts:")
    ]

    md = _report(str(save), "--markdown")
    assert md.returncode == 0, md.stderr[-3000:]
    assert "rollouts" in _headings(md.stdout)
    [(head, rows)] = [t for t in _tables(md.stdout) if t[0][:1] == ["endpoint"]]
    assert head == list(render_markdown.ROLLOUT_HEADERS)
    by_ep = {r[0]: dict(zip(head, r, strict=True)) for r in rows}
    chat = by_ep[f"http://127.0.0.1:{srv.port}/v1/chat/completions"]
    comp = by_ep[f"http://127.0.0.1:{srv.port}/v1/completions"]
    assert chat["requests"] == str(BATCHES * 9) and comp["requests"] == str(BATCHES)
    assert chat["clients"] == "httpx, openai" and comp["clients"] == "requests"
    assert chat["outcomes"] == f"ok {BATCHES * 9}"
    server_tokens = sum(e.completion_tokens for e in log)
    completion = [
        int(r["tokens prompt / completion"].split(" / ")[1].split()[0]) for r in (chat, comp)
    ]
    assert sum(completion) == server_tokens
    assert chat["in flight mean / max (time at max)"].split(" / ")[1].startswith("8 ")
    # the Markdown batches line is the text's, the rule that made the batches included
    [batches] = [x.strip() for x in run_section if x.strip().startswith("batches:")]
    assert batches.startswith(f"batches: {BATCHES} (") and f"- {batches}" in md.stdout

    pytest.importorskip("matplotlib")
    page = tmp_path / "again.html"
    html = _report(str(save), "--html", str(page))
    assert html.returncode == 0, html.stderr[-3000:]
    body = page.read_text()
    assert "<h2>Rollout requests</h2>" in body
    assert body.count("data:image/png;base64,") >= 3  # two endpoints and the batches


def test_a_folder_saved_without_rollouts_reports_none(tmp_path: Path) -> None:
    # the same run, its rollouts file gone (a folder saved before it was kept): no
    # section and no error; a corrupt one is a note, not a crash
    from gyreprof.commands.report import saved_run
    from gyreprof.integrations._auto import rollout_record

    save = tmp_path / "saved"
    with LLMServer() as srv:
        proc, _ = gyreprof_run(
            tmp_path, script("http_probes.py"), srv.url, "3", options=("--save", str(save))
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    kept = save / rollout_record.FOLDER_FILE
    assert saved_run(save).rollouts is not None
    kept.write_text('{"format": "gyreprof.rollouts/1", "endpoints": 7}')
    report = saved_run(save)
    assert report.rollouts is None
    assert any(n.startswith(f"skipped {rollout_record.FOLDER_FILE}") for n in report.notes)
    kept.unlink()
    report = saved_run(save)
    assert report.rollouts is None and "rollout requests" not in str(report)


def test_metadata_probes_are_no_rollout_endpoint_and_user_tables_in_markdown(
    tmp_path: Path,
) -> None:
    pytest.importorskip("markdown_it")
    n = 6
    save = tmp_path / "saved"
    with LLMServer() as srv:
        proc, data = gyreprof_run(
            tmp_path,
            script("http_probes.py"),
            srv.url,
            str(n),
            # every step kept: a first request slowed by a loaded machine is not start-up
            options=("--save", str(save), "--warmup-steps", "0"),
            timeout=240,
        )
        log = srv.wait_logged(n)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    assert printed(proc.stdout, "probes") == 3 and len(log) == n
    roll = data["rollouts"]
    # the probes are made and recorded, yet never a rollout endpoint: one note names them
    assert [e["endpoint"] for e in roll["endpoints"]] == [
        f"http://127.0.0.1:{srv.port}/v1/chat/completions"
    ]
    assert roll["endpoints"][0]["requests"] == n
    [note] = [x for x in roll["notes"] if "cloud metadata probe" in x]
    assert note.startswith("3 cloud metadata probe(s)")
    assert "metadata.google.internal" in note and "fe80::1" in note
    assert not any("metadata" in x for x in data["notes"] if x.startswith("rollouts:"))
    # the trainer's wait holds the n real requests only (the main thread is the trainer;
    # with the probes in it, it would hold n + 3 waits)
    assert data["trainer"]["phases"]["wait"]["count"] == n
    text = proc.stdout + proc.stderr
    assert "metadata.google.internal:80" not in text and "fe80::1:9" not in text

    md = _report(str(save), "--markdown")
    assert md.returncode == 0, md.stderr[-3000:]
    heads = _headings(md.stdout)
    mine = [h for h in heads if h.startswith("your profiler")]
    assert len(mine) == 1, heads
    # the user's table follows its heading, with its two phases and their counts
    tables = _tables(md.stdout)
    users = [t for t in tables if {"load", "parse"} <= {r[0] for r in t[1]}]
    assert len(users) == 1
    head, rows = users[0]
    counts = {r[0]: r[head.index("count")] for r in rows}
    assert counts["load"] == counts["parse"] == str(n)
    assert "rollouts" in heads
    # and the text report of the folder shows the same table heading
    text_again = _report(str(save))
    assert any(line.startswith("your profiler") for line in text_again.stdout.splitlines())


@pytest.mark.parametrize(
    ("host", "probe"),
    [
        ("169.254.169.254", True),
        ("169.254.3.7", True),  # any link-local address, not only the well-known one
        ("metadata.google.internal", True),
        ("METADATA.google.internal.", True),
        ("fe80::1", True),
        ("[fe80::1]", True),
        ("fd00:ec2::254", True),
        ("100.100.100.200", True),
        ("169.255.0.1", False),  # next to link-local, not in it
        ("127.0.0.1", False),
        ("metadata.example.com", False),  # a name that only looks like one
        ("metadata", False),  # a service a user named so (compose, k8s)
        ("", False),
    ],
)
def test_metadata_hosts(host: str, probe: bool) -> None:
    assert ar.is_metadata_host(host) is probe


def test_endpoint_host_of_ipv6_and_ports() -> None:
    assert ar.endpoint_host("http://fe80::1:80/x") == "fe80::1"
    assert ar.endpoint_host("https://metadata.google.internal:443/a/{id}") == (
        "metadata.google.internal"
    )
    assert ar.endpoint_host("(other endpoints)") == ""
    assert not ar.is_metadata_endpoint("(other endpoints)")


def _row(ep: str, start: int, end: int, **kw: Any) -> ar.SpanRow:
    return span_row(ep, start, end, **kw)


def test_probes_overlapping_a_batch_do_not_join_it() -> None:
    # a probe in flight alongside a rollout batch: kept, it would be an endpoint with a
    # batch of its own; left out, the rollout endpoint's batch is as without it
    real = "http://127.0.0.1:8000/v1/chat/completions"
    probe = "http://169.254.169.254:80/latest/meta-data/"
    spans = [_row(real, 0, 10_000_000), _row(real, 1_000, 50_000_000)]
    spans += [_row(probe, 0, 1_000_000_000, outcome="timeout"), _row(probe, 5, 900_000_000)]
    folded = {probe: ar.Totals(requests=3), real: ar.Totals(requests=2)}
    kept, kept_folded, note = ar.without_metadata_probes(spans, folded)
    assert [s.endpoint for s in kept] == [real, real] and list(kept_folded) == [real]
    assert note is not None and note.startswith("5 cloud metadata probe(s)")
    assert "169.254.169.254" in note
    report = ar.analyse(kept, kept_folded)
    assert report is not None and [e.endpoint for e in report.endpoints] == [real]
    assert report.batch_count == 1 and report.endpoints[0].requests == 4
    assert ar.without_metadata_probes(kept, kept_folded)[2] is None


def test_rollouts_markdown_escapes_names_and_tables_parse() -> None:
    # an endpoint with a '|' and a backtick in its path must stay in its own cell
    pytest.importorskip("markdown_it")
    weird = "http://127.0.0.1:8000/v1/a|b`c"
    spans = [_row(weird, 0, 5_000_000), _row(weird, 1_000, 9_000_000, outcome="5xx")]
    report = ar.analyse(spans, {})
    assert report is not None
    md = report.to_markdown()
    [(head, rows)] = _tables(md)
    assert head == list(render_markdown.ROLLOUT_HEADERS)
    [row] = rows
    assert len(row) == len(head) and row[0] == weird
    assert row[2] == "2" and row[4] == "ok 1, 5xx 1"
    assert "- batches: 1 (1 busy period(s) of an endpoint)" in md  # no group: busy periods
