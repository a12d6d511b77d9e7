"""gyreprof selfcheck: its four exit codes on small factories (tests/helpers/procs/sc_factories.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psutil
import pytest

from gyreprof.cli import main as cli_main
from gyreprof.diagnostics.selfcheck import SelfCheckResult, selfcheck

PROCS = Path(__file__).parent / "helpers" / "procs"


def check(target: str, **kw: object) -> SelfCheckResult:
    kw.setdefault("timeout_s", 30.0)
    return selfcheck(f"sc_factories:{target}", cwd=PROCS, **kw)  # type: ignore[arg-type]


def test_ok_prints_endpoint_type_count_and_time() -> None:
    r = check("make_ok", kwargs={"batch_size": 5})
    assert r.status == "ok" and r.exit_code == 0
    assert r.count == 5 and r.result_type == "list"
    assert r.endpoint == "http://127.0.0.1:8000/rollout"
    assert r.sampler_type == "sc_factories.ListSampler"
    assert r.build_s is not None and r.call_s is not None and r.elapsed_s >= r.call_s
    text = str(r)
    assert "endpoint: http://127.0.0.1:8000/rollout" in text and "count 5" in text
    assert "result: OK" in text


def test_dict_of_arrays_counts_the_batch() -> None:
    r = check("make_array")
    assert r.exit_code == 0 and r.count == 8 and r.result_type == "dict"
    assert r.endpoint == "127.0.0.1:5555"


def test_empty_result_exits_2() -> None:
    r = check("make_empty")
    assert r.status == "empty" and r.exit_code == 2 and r.count == 0


def test_exception_exits_1_with_the_full_traceback() -> None:
    r = check("make_raises")
    assert r.status == "error" and r.exit_code == 1 and r.stage == "call"
    assert r.error is not None and "ConnectionRefusedError" in r.error
    assert r.traceback is not None
    assert "sc_factories.py" in r.traceback and "in sample" in r.traceback
    assert "_selfcheck_child" not in r.traceback  # only the user's frames


def test_exception_while_building_exits_1() -> None:
    r = check("make_broken")
    assert r.exit_code == 1 and r.stage == "build"
    assert r.traceback is not None and "sampler.yaml" in r.traceback


def test_hang_is_abandoned_with_stacks_and_exits_3() -> None:
    t0 = time.monotonic()
    r = check("make_hangs", timeout_s=1.5)
    assert time.monotonic() - t0 < 15.0  # abandoned, not waited for
    assert r.status == "timeout" and r.exit_code == 3 and r.stage == "call"
    assert r.error is not None and "calling sample()" in r.error
    assert r.stacks is not None and "in sample" in r.stacks  # where it was stuck
    assert "TIMED OUT" in str(r)


def test_hang_while_building_names_the_stage() -> None:
    r = check("make_hangs_in_build", timeout_s=1.0)
    assert r.exit_code == 3 and r.stage == "build"
    assert r.error is not None and "building the sampler" in r.error


def test_abandoned_check_leaves_no_processes_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    r = check("make_hangs_with_child", kwargs={"pidfile": str(pidfile)}, timeout_s=2.0)
    assert r.exit_code == 3
    worker = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while psutil.pid_exists(worker):
        try:
            if psutil.Process(worker).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        assert time.monotonic() < deadline, "the sampler's worker process survived"
        time.sleep(0.05)


def test_import_problems_are_clear_messages_not_tracebacks() -> None:
    r = selfcheck("gyreprof_no_such_module:make", cwd=PROCS, timeout_s=30)
    assert r.exit_code == 1 and r.traceback is None
    assert r.error is not None and "cannot import module 'gyreprof_no_such_module'" in r.error
    r = check("no_such_factory")
    assert r.exit_code == 1 and r.traceback is None
    assert r.error is not None and "make_ok" in r.error  # lists what the module has
    r = check("NOT_CALLABLE")
    assert r.exit_code == 1 and "not a callable" in (r.error or "")
    r = check("make_ok", method="nope")
    assert r.exit_code == 1 and "sample" in (r.error or "")


@pytest.mark.parametrize(
    ("target", "kw", "match"),
    [
        ("no_colon", {}, "module:factory"),
        ("a:b:c", {}, "module:factory"),
        ("bad name:f", {}, "Python names"),
        ("m:f", {"timeout_s": 0}, "timeout_s"),
        ("m:f", {"kwargs": {"x": object()}}, "JSON"),
        ("m:f", {"method": "not a name"}, "method"),
    ],
)
def test_bad_arguments(target: str, kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        selfcheck(target, **kw)  # type: ignore[arg-type]


def test_cli_four_exit_codes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(PROCS)  # the factory module is found in the current folder
    assert cli_main(["selfcheck", "sc_factories:make_ok", "--kwargs", '{"batch_size": 2}']) == 0
    assert "count 2" in capsys.readouterr().out
    assert cli_main(["selfcheck", "sc_factories:make_raises"]) == 1
    assert "Traceback" in capsys.readouterr().out
    assert cli_main(["selfcheck", "sc_factories:make_empty", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["status"] == "empty"
    assert cli_main(["selfcheck", "sc_factories:make_hangs", "--timeout", "1"]) == 3
    assert "TIMED OUT" in capsys.readouterr().out


def test_cli_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["selfcheck", "nocolon"]) == 2
    assert "module:factory" in capsys.readouterr().err
    assert cli_main(["selfcheck", "m:f", "--kwargs", "[1, 2]"]) == 2
    assert "JSON object" in capsys.readouterr().err
    assert cli_main(["selfcheck", "m:f", "--kwargs", "{bad"]) == 2
    with pytest.raises(SystemExit):
        cli_main(["selfcheck", "m:f", "--timeout", "-1"])


def test_selfcheck_on_the_rollout_client_example() -> None:
    examples = Path(__file__).resolve().parent.parent / "examples"
    r = selfcheck("rollout_client:make_sampler", kwargs={"batch_size": 3}, cwd=examples)
    assert r.exit_code == 0, str(r)
    assert r.count == 3
    assert r.endpoint is not None and r.endpoint.startswith("http://127.0.0.1:")


# ------------------------------------------------------------------ hidden failures
def _np2() -> bool:
    np = pytest.importorskip("numpy")
    return not hasattr(np, "float_")


def test_swallowed_attribute_error_inside_the_sampler_is_named() -> None:
    """Every call raised inside sample() and was swallowed; the old check said only
    EMPTY RESULT."""
    if not _np2():
        pytest.skip("needs NumPy 2 (np.float_ removed)")
    r = selfcheck("sc_swallow:make_swallowing", cwd=PROCS, timeout_s=30)
    assert r.status == "empty" and r.exit_code == 2
    assert r.swallowed, str(r)
    top = r.swallowed[0]
    assert top["type"] == "AttributeError" and "float_" in top["message"]
    assert top["count"] == 4
    assert top["caught_at"].startswith(str(PROCS / "sc_swallow.py") + ":")
    assert "numpy" in top["raised_at"]
    text = str(r)
    assert "4 exceptions raised and swallowed inside sample()" in text
    assert "4 x AttributeError" in text


def test_empty_result_shows_its_fields_the_server_answered_under_another_key() -> None:
    r = selfcheck("sc_swallow:make_other_key", cwd=PROCS, timeout_s=30)
    assert r.status == "empty" and r.count == 0
    assert r.result_fields is not None
    assert "samples (list, 0 items)" in r.result_fields
    assert "data (list, 8 items)" in r.result_fields
    assert "another key" in str(r)
    assert not r.swallowed  # nothing raised: the data simply came under "data"


def test_ok_result_counts_no_swallowed_exceptions_from_the_standard_library() -> None:
    r = check("make_ok", kwargs={"batch_size": 3})
    assert r.status == "ok" and r.swallowed == []
    assert r.result_fields == []


def test_an_object_whose_list_field_is_empty_is_empty_not_a_failure() -> None:
    """It has no count of its own; the old check said FAILED [1]: no sample count."""
    r = selfcheck("sc_empty:make_empty_fields", cwd=PROCS, timeout_s=30)
    assert r.status == "empty" and r.exit_code == 2 and r.count == 0, str(r)
    assert r.count_rule == "empty fields"
    assert r.result_fields is not None and "items (list, 0 items)" in r.result_fields
    assert "source (str 'rollout-server')" in r.result_fields
    assert "result: EMPTY RESULT -- see its fields above" in str(r)


def test_an_http_answer_under_other_keys_shows_the_status_and_keys() -> None:
    r = selfcheck("sc_empty:make_http", cwd=PROCS, timeout_s=30)
    assert r.status == "empty" and r.exit_code == 2, str(r)
    assert r.http_status == 200 and r.http_keys == ["api_version", "data"], str(r)
    text = str(r)
    assert "last HTTP response: status 200, top-level keys: api_version, data" in text
    assert "see the response's keys above" in text and "swallowed exceptions" not in text
    for sw in r.swallowed or []:  # the import machinery's catches are not the user's
        assert not sw["caught_at"].startswith("<"), sw
