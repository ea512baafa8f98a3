"""What the pages say and where they send the browser: filters kept through every redirect, one
metadata syntax (``key=value``, ``key:value`` read with a hint), attempts numbered as tries from
1, error lines that name their code once, the alert rule's weak fields, the favicon, and the
Live page in the order completions were stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.admin.query import QueryError, build_filter, split_metadata
from receiver.console import overview, timeline, web
from receiver.service.app import create_app
from receiver.store.rows import AttemptRow
from tests.adminsupport import AUTH, admin_settings, deliver
from tests.console.support import log_in
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path


async def test_filters_survive_the_redirects_to_the_jobs_list(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        to_login = await c.get("/ui/?state=failed&source=reducto")
        assert to_login.headers["location"] == (
            "/ui/login?next=%2Fui%2F%3Fstate%3Dfailed%26source%3Dreducto"
        )
        await log_in(c)
        home = await c.get("/ui/?state=failed&source=reducto")
        assert home.status_code == 303
        assert home.headers["location"] == "/ui/jobs?state=failed&source=reducto"
        assert (await c.get("/ui/")).headers["location"] == "/ui/jobs"
        emptied = await c.get("/ui/jobs?state=failed&source=&metadata=")
        assert emptied.headers["location"] == "/ui/jobs?state=failed"


def test_metadata_filters_read_key_equals_value_and_key_colon_value_alike() -> None:
    assert build_filter(metadata=["customer=acme"]).metadata == (("customer", "acme"),)
    assert build_filter(metadata=["customer:acme"]).metadata == (("customer", "acme"),)
    assert build_filter(metadata=["url=https://x?a=b"]).metadata == (("url", "https://x?a=b"),)
    assert build_filter(metadata=["url:https://x"]).metadata == (("url", "https://x"),)
    assert split_metadata("a=b:c") == ("a", "=", "b:c")
    assert split_metadata("a:b=c") == ("a", ":", "b=c")
    for bad in ("novalue", "=x", ":x"):
        with pytest.raises(QueryError, match="key=value"):
            build_filter(metadata=[bad])


async def test_the_jobs_list_filters_by_either_syntax_and_shows_the_documented_one(
    tmp_path: Path,
) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "job-acme", customer="acme")
        await deliver(c, "job-other", customer="other")
        await log_in(c)
        equals = (await c.get("/ui/jobs", params={"metadata": "customer=acme"})).text
        colon = (await c.get("/ui/jobs", params={"metadata": "customer:acme"})).text
        api = await c.get("/jobs", params={"metadata": "customer=acme"}, headers=AUTH)
    for page in (equals, colon):
        assert "job-acme" in page
        assert "job-other" not in page
    assert 'placeholder="key=value"' in equals
    assert "Metadata filters are written" not in equals
    assert "<code>customer=acme</code>" in colon  # the hint: how it is written
    assert [j["job_id"] for j in api.json()["jobs"]] == ["job-acme"]


def _attempt(handler: str, n: int, outcome: str, at: float) -> AttemptRow:
    return AttemptRow(
        handler, n, outcome, None if outcome == "succeeded" else "503", None, None, at
    )


def test_attempts_are_numbered_as_tries_from_one_probes_and_replays_included() -> None:
    rows = [
        _attempt("hook", 1, "retry", 1),
        _attempt("hook", 1, "retry", 2),  # the circuit's probe: the store's count did not move
        _attempt("hook", 2, "dead", 3),
        _attempt("hook", 0, "retry", 4),  # replayed, then a probe before any counted attempt
        _attempt("hook", 1, "succeeded", 5),
        _attempt("files", 1, "succeeded", 1),
    ]
    shown = [(a.handler, n, probe) for a, n, probe in timeline.numbered(rows)]
    assert shown == [("hook", 1, False), ("hook", 2, True), ("hook", 3, False),
                     ("hook", 1, True), ("hook", 2, False), ("files", 1, False)]  # fmt: skip
    assert timeline.tries(rows, "hook", "succeeded") == 2
    assert timeline.tries(rows[:3], "hook", "pending") == 0  # replayed, not tried yet
    assert timeline.tries(rows[:2], "hook", "pending") == 2
    assert timeline.tries([], "hook", "pending") == 0


def test_an_error_line_names_its_code_once() -> None:
    assert web.unprefixed("extraction_failed: No text layer", "extraction_failed") == (
        "No text layer"
    )
    assert web.unprefixed("POST http://x answered 503", "http_5xx") == "POST http://x answered 503"
    assert web.unprefixed("extraction_failedness", "extraction_failed") == "extraction_failedness"
    assert web.unprefixed(None, "x") == ""


def test_a_probe_outcome_is_told_after_the_replay_notice_and_nothing_else_is() -> None:
    told = web.notice({"done": "replayed", "n": "1", "probe": "failed"})
    assert told is not None
    assert told.startswith("Queued 1 deliveries again. The handler's circuit was open")
    assert "failed" in told
    assert web.notice({"done": "replayed", "n": "1", "probe": "<b>anything</b>"}) == (
        "Queued 1 deliveries again."
    )


def test_weak_fields_follow_the_alert_rule_mean_under_threshold_over_ten_extractions() -> None:
    rows = [
        {"field": "few", "count": 6, "mean": 0.5, "p10": 0.4, "threshold": 0.8},
        {"field": "alerting", "count": 10, "mean": 0.79, "p10": 0.6, "threshold": 0.8},
        {"field": "tail", "count": 40, "mean": 0.9, "p10": 0.7, "threshold": 0.8},
        {"field": "fine", "count": 40, "mean": 0.95, "p10": 0.9, "threshold": 0.8},
    ]
    marked = {r["field"]: (r["weak"], r["low_p10"]) for r in overview.weak_fields(rows)}
    assert marked == {"few": (False, True), "alerting": (True, True),
                      "tail": (False, True), "fine": (False, False)}  # fmt: skip
    assert overview.weak_fields(rows)[0]["field"] == "alerting"  # flagged first
    assert overview.ALERT_MIN_COUNT == 10


def test_the_overview_threshold_matches_the_alert_rule() -> None:
    from pathlib import Path

    alerts = (Path(__file__).parents[2] / "deploy/prometheus/alerts.yml").read_text()
    rule = alerts[alerts.index("alert: JobhookFieldConfidenceLow") :]
    rule = rule[: rule.index("- alert:")] if "- alert:" in rule else rule
    assert ") < 0.80" in rule
    assert f">= {overview.ALERT_MIN_COUNT}" in rule


async def test_the_favicon_is_served_to_every_page_the_login_page_included(
    tmp_path: Path,
) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        icon = await c.get("/ui/static/favicon.svg")
        login = (await c.get("/ui/login")).text
        await log_in(c)
        pages = [(await c.get(p)).text for p in ("/ui/jobs", "/ui/dead", "/ui/overview",
                                                 "/ui/live")]  # fmt: skip
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert icon.text.startswith("<svg")
    link = '<link rel="icon" href="/ui/static/favicon.svg" type="image/svg+xml">'
    assert all(link in page for page in [login, *pages])


async def test_live_starts_with_completions_in_the_order_they_were_stored(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "job-b", status="Pending")  # known first, finished last
        await deliver(c, "job-a")
        await deliver(c, "job-b")
        await log_in(c)
        page = (await c.get("/ui/live")).text
    assert page.index("job-b") < page.index("job-a")
    assert 'data-live-src="/ui/events?last_event_id=2"' in page
