"""The known routes of TRL's generation server (``analysis.rollouts.route_role``) and what the
report makes of them: each endpoint's role, the weight-sync words, the generation endpoint
the verdict names."""

from __future__ import annotations

from gyreprof.analysis import rollouts as ar

from helpers.spans import span_row

BASE = "http://127.0.0.1:8000"


def _span(path: str, start_ms: float, end_ms: float) -> ar.SpanRow:
    return span_row(BASE + path, int(start_ms * 1e6), int(end_ms * 1e6), bytes_in=10, bytes_out=10)


def test_route_roles() -> None:
    role = ar.route_role
    assert role(BASE + "/v1/completions") == "generation"
    assert role(BASE + "/v1/chat/completions") == "generation"
    assert role(BASE + "/inference/v1/generate") == "generation"
    assert role(BASE + "/update_weights") == "weight sync"
    assert role(BASE + "/reset_prefix_cache/") == "weight sync"  # a trailing slash
    assert role(BASE + "/update_named_param/") == "weight sync"  # TRL < 1.0's server
    assert role(BASE + "/health") == "control"
    # behind a path prefix
    assert role("https://gw:443/vllm/v1/completions") == "generation"
    # the nearest route wins: /v1/chat/completions/render is not /v1/chat/completions
    assert role(BASE + "/v1/chat/completions/render") == "generation"
    # unknown routes and malformed names: no role
    assert role(BASE + "/v1/embeddings") is None
    assert role(BASE + "/") is None
    assert role("(other endpoints)") is None
    assert role("http://h:1") is None


def test_report_names_roles_and_the_weight_sync() -> None:
    spans = [_span("/v1/completions", 0, 200), _span("/v1/completions", 300, 520)]
    spans += [_span("/update_weights", 200, 230), _span("/update_weights", 520, 560)]
    spans += [_span("/reset_prefix_cache", 230, 235)]
    spans += [_span("/health", 0, 1)]
    report = ar.analyse(spans)
    assert report is not None
    roles = {e.endpoint[len(BASE) :]: e.role for e in report.endpoints}
    assert roles == {
        "/v1/completions": "generation",
        "/update_weights": "weight sync",
        "/reset_prefix_cache": "weight sync",
        "/health": "control",
    }
    totals = {e.endpoint[len(BASE) :]: e.total_ms for e in report.endpoints}
    assert abs(totals["/update_weights"] - 70.0) < 1e-6
    assert abs(totals["/v1/completions"] - 420.0) < 1e-6
    words = ar.weight_sync_words(report)
    assert words is not None
    assert words.startswith("weight sync: 3 requests to 2 endpoint(s), 75 ms in all")
    assert "slowest route /update_weights" in words
    # the generation endpoint is chosen among the non-sync ones even when a sync route has
    # more requests
    many_syncs = ar.analyse(spans + [_span("/update_weights", 600 + i, 601 + i) for i in range(9)])
    assert many_syncs is not None
    gen = ar.generation_endpoints(many_syncs.endpoints)
    assert [e.endpoint for e in gen] == [BASE + "/v1/completions"]
    # a report of weight-sync calls only keeps them all
    only = ar.analyse([_span("/update_weights", 0, 10)])
    assert only is not None and len(ar.generation_endpoints(only.endpoints)) == 1
    no_sync = ar.analyse([_span("/v1/completions", 0, 5)])
    assert no_sync is not None and ar.weight_sync_words(no_sync) is None


def test_role_round_trips_through_the_json() -> None:
    report = ar.analyse([_span("/update_weights", 0, 10)])
    assert report is not None
    again = ar.RolloutReport.from_dict(report.to_dict())
    assert again.endpoints[0].role == "weight sync"
    assert again.endpoints[0].total_ms == report.endpoints[0].total_ms
