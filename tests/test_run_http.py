"""``gyreprof run`` on an unmodified HTTP rollout client (httpx from a thread pool, the
openai SDK, requests) against the local server: the run report's ``rollouts`` part,
checked against the server's own log."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("openai")
pytest.importorskip("requests")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from helpers.llm_server import LLMServer  # noqa: E402
from helpers.run_scripts.runhelp import gyreprof_run, printed, script  # noqa: E402

BATCHES = 3


def test_run_reports_rollouts_of_an_unmodified_client(tmp_path: Path) -> None:
    with LLMServer() as srv:
        page = tmp_path / "run.html"
        proc, data = gyreprof_run(
            tmp_path,
            script("http_rollouts.py"),
            srv.url,
            str(BATCHES),
            options=("--html", str(page)),
            timeout=240,
        )
        log = srv.wait_logged(BATCHES * 10)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    assert printed(proc.stdout, "requests") == BATCHES * 10 == len(log)
    roll = data["rollouts"]
    assert roll["format"] == "gyreprof.rollouts/1"
    eps = {e["endpoint"]: e for e in roll["endpoints"]}
    chat = eps[f"http://127.0.0.1:{srv.port}/v1/chat/completions"]
    comp = eps[f"http://127.0.0.1:{srv.port}/v1/completions"]
    assert chat["requests"] == BATCHES * 9 and chat["clients"] == ["httpx", "openai"]
    assert comp["requests"] == BATCHES and comp["clients"] == ["requests"]
    assert chat["attempts"] == chat["requests"]  # no retries, and openai's send not doubled
    server_tokens = sum(e.completion_tokens for e in log)
    assert chat["completion_tokens"] + comp["completion_tokens"] == server_tokens
    assert chat["outcomes"]["ok"] == BATCHES * 9 and comp["outcomes"]["ok"] == BATCHES
    # each pool.map of 8 with one slow request is a batch with a long tail (the first
    # also waits for the pool's threads and connections to start, on a loaded machine)
    assert roll["batch_count"] == BATCHES
    batches = sorted(roll["batches"], key=lambda b: b["start_ns"])
    assert all(b["requests"] == 8 and b["slowest_ms"] >= 400 for b in batches)
    assert all(b["tail_share"] > 0.4 for b in batches[1:])
    assert chat["in_flight_max"] == 8
    assert "rollout requests" in proc.stdout + proc.stderr
    assert "nothing recognised" not in proc.stdout + proc.stderr
    # the record reads back whole; the page has the section and its pictures
    from gyreprof.analysis.run import RunRecord

    again = RunRecord.from_dict(data)
    assert again.rollouts is not None and again.rollouts.requests == BATCHES * 10
    if page.exists():  # written when matplotlib is installed
        text = page.read_text()
        assert "<h2>Rollout requests</h2>" in text
        assert text.count("data:image/png;base64,") >= 3  # two endpoints and the batches


def test_old_run_records_without_rollouts_still_read() -> None:
    from gyreprof.analysis.run import RunRecord

    old = {
        "format": "gyreprof.run/1",
        "verdict": None,
        "wait": None,
        "sampler": None,
        "trainer": None,
        "processes": [],
        "exit_code": 0,
        "notes": [],
    }
    assert RunRecord.from_dict(old).rollouts is None


@pytest.mark.slow  # test_run_input's signal tests cover the exit code by default
def test_ctrl_c_ends_an_http_client_by_sigint_and_keeps_its_requests(tmp_path: Path) -> None:
    # saving the requests at exit defines no dataclass then: an ``exec`` at exit would
    # make Python leave with 1 instead of by SIGINT
    import signal

    from helpers.run_scripts.runhelp import check_format, signal_when_ready

    with LLMServer() as srv:
        data, _ = signal_when_ready(tmp_path, script("http_forever.py"), srv.url, sig=signal.SIGINT)
        check_format(data)
        [ep] = data["rollouts"]["endpoints"]
        answered = len(srv.settled_log())
    # the request the signal cut short may not have reached the server, and is no "ok"
    assert 1 <= ep["outcomes"].get("ok", 0) <= answered
    assert ep["requests"] <= answered + 1
