"""Webhooks: signed with svix, retried under one message id, and a seeded fraction lost."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import pytest
from svix.webhooks import Webhook

from receiver.errors import ConfigError
from receiver.sim import Simulator
from tests.sim.helpers import API_KEY, Recorder, fixture, shape_of, wait_for
from tests.support import SECRET, free_port, live_server

NATIVE = "native-secret-0123456789"
TERMINAL = ("Completed", "completed", "done")


def _metadata(sample: dict[str, Any]) -> dict[str, Any]:
    """The metadata a fixture webhook carries, so the simulated one can carry the same keys."""
    found = sample.get("metadata", sample.get("data", {}).get("metadata", {}))
    assert isinstance(found, dict)
    return found


def _settled(sim: Simulator, count: int) -> bool:
    done = [d for d in sim.deliveries if d.state in ("delivered", "failed", "dropped")]
    return len(done) >= count


@pytest.mark.parametrize(
    ("provider", "sample"),
    [
        ("reducto", "webhook_completed"),
        ("docurift", "webhook_completed"),
        ("knowhere", "webhook_completed"),
        ("docextract", "webhook_completed"),
    ],
)
async def test_terminal_webhook_arrives_signed_and_verifies_with_svix(
    provider: str, sample: str
) -> None:
    expected = fixture(provider)[sample]
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        sim = Simulator(provider, api_key=API_KEY, webhook_url=f"{hook}/hook", secret=SECRET)
        (job_id,) = sim.create_jobs(duration=0.1, metadata=_metadata(expected))
        async with sim:
            await wait_for(
                lambda: any(d.state == "delivered" and d.status in TERMINAL for d in sim.deliveries)
            )
    final = recorder.received[-1]
    Webhook(SECRET).verify(final.body, final.headers)
    assert abs(int(final.headers["svix-timestamp"]) - time.time()) < 10
    body = json.loads(final.body)
    assert shape_of(body) == shape_of(expected)
    assert job_id in final.body.decode()


@pytest.mark.parametrize("provider", ["docurift", "knowhere", "docextract"])
async def test_failed_job_sends_the_fixture_failure_webhook(provider: str) -> None:
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        sim = Simulator(provider, api_key=API_KEY, webhook_url=f"{hook}/hook", secret=SECRET)
        sim.create_jobs(duration=0, outcome="failed")
        async with sim:
            await wait_for(lambda: _settled(sim, 1))
    (only,) = recorder.received
    body = json.loads(only.body)
    if provider == "docextract":
        assert body["event"] == "job.failed"
        assert body["data"]["status"] == "failed"
    else:
        assert shape_of(body) == shape_of(fixture(provider)["webhook_failed"])


async def test_reducto_also_announces_non_terminal_changes() -> None:
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        sim = Simulator("reducto", api_key=API_KEY, webhook_url=f"{hook}/hook", secret=SECRET)
        sim.create_jobs(duration=0.3)
        async with sim:
            await wait_for(lambda: _settled(sim, 3))
    statuses = sorted(json.loads(r.body)["status"] for r in recorder.received)
    assert statuses == ["Completed", "Completing", "InProgress"]
    assert len({r.headers["svix-id"] for r in recorder.received}) == 3
    for received in recorder.received:
        Webhook(SECRET).verify(received.body, received.headers)


async def test_retries_keep_the_message_id_and_re_sign_each_attempt() -> None:
    recorder = Recorder(script=[500, 503])
    async with live_server(recorder.app) as hook:
        sim = Simulator(
            "knowhere",
            api_key=API_KEY,
            webhook_url=f"{hook}/hook",
            secret=SECRET,
            retry_delays=(1.05, 1.05),
        )
        sim.create_jobs(duration=0)
        async with sim:
            await wait_for(lambda: _settled(sim, 1))
    attempts = recorder.received
    assert len(attempts) == 3
    assert len({a.headers["svix-id"] for a in attempts}) == 1
    assert {a.body for a in attempts} == {attempts[0].body}
    stamps = [int(a.headers["svix-timestamp"]) for a in attempts]
    assert stamps == sorted(stamps)
    assert stamps[-1] > stamps[0]
    assert attempts[-1].headers["svix-signature"] != attempts[0].headers["svix-signature"]
    for attempt in attempts:
        Webhook(SECRET).verify(attempt.body, attempt.headers)
    (delivery,) = sim.deliveries
    assert delivery.state == "delivered"
    assert [a.status_code for a in delivery.attempts] == [500, 503, 204]


async def test_sender_gives_up_after_the_schedule_and_records_transport_errors() -> None:
    sim = Simulator(
        "docurift",
        api_key=API_KEY,
        webhook_url=f"http://127.0.0.1:{free_port()}/hook",
        secret=SECRET,
        retry_delays=(0.05, 0.05),
    )
    sim.create_jobs(duration=0)
    async with sim:
        await wait_for(lambda: _settled(sim, 1))
    (delivery,) = sim.deliveries
    assert delivery.state == "failed"
    assert [a.error for a in delivery.attempts] == ["ConnectError"] * 3


async def _run_drops(seed: int, hook: str, recorder: Recorder) -> tuple[set[str], set[str]]:
    sim = Simulator(
        "docurift", api_key=API_KEY, webhook_url=f"{hook}/hook", secret=SECRET, drop=0.3, seed=seed
    )
    sim.create_jobs(200, duration=0)
    recorder.received.clear()
    async with sim:
        await wait_for(lambda: _settled(sim, 200))
    dropped = {d.message_id for d in sim.deliveries if d.state == "dropped"}
    arrived = {r.headers["svix-id"] for r in recorder.received}
    return dropped, arrived


async def test_drop_fraction_is_honoured_and_reproducible_with_the_seed() -> None:
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        dropped, arrived = await _run_drops(7, hook, recorder)
        dropped_again, arrived_again = await _run_drops(7, hook, recorder)
        dropped_other, _ = await _run_drops(8, hook, recorder)
    assert 30 <= len(dropped) <= 90
    assert len(arrived) == 200 - len(dropped)
    assert not dropped & arrived
    assert (dropped_again, arrived_again) == (dropped, arrived)
    assert dropped_other != dropped


@pytest.mark.parametrize("provider", ["docurift", "docextract"])
async def test_native_signature_headers_are_added_when_configured(provider: str) -> None:
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        sim = Simulator(
            provider,
            api_key=API_KEY,
            webhook_url=f"{hook}/hook",
            secret=SECRET,
            native_secret=NATIVE,
        )
        sim.create_jobs(duration=0)
        async with sim:
            await wait_for(lambda: _settled(sim, 1))
    (received,) = recorder.received
    Webhook(SECRET).verify(received.body, received.headers)
    if provider == "docurift":
        stamp = received.headers["x-docurift-timestamp"]
        signed = f"{stamp}.".encode() + received.body
        assert received.headers["x-docurift-event-id"] == json.loads(received.body)["id"]
        assert received.headers["x-docurift-event-id"] == received.headers["svix-id"]
    else:
        signed = received.body
    expected = hmac.new(NATIVE.encode(), signed, hashlib.sha256).hexdigest()
    header = "x-docurift-signature" if provider == "docurift" else "x-docextract-signature"
    assert hmac.compare_digest(received.headers[header], expected)


async def test_webhook_header_family_can_be_standard_webhooks() -> None:
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        sim = Simulator(
            "knowhere",
            api_key=API_KEY,
            webhook_url=f"{hook}/hook",
            secret=SECRET,
            header_family="webhook",
        )
        sim.create_jobs(duration=0)
        async with sim:
            await wait_for(lambda: _settled(sim, 1))
    (received,) = recorder.received
    assert "svix-id" not in received.headers
    Webhook(SECRET).verify(received.body, received.headers)


async def test_job_view_lists_the_jobs_webhooks() -> None:
    recorder = Recorder()
    async with live_server(recorder.app) as hook:
        sim = Simulator("knowhere", api_key=API_KEY, webhook_url=f"{hook}/hook", secret=SECRET)
        (job_id,) = sim.create_jobs(duration=0)
        async with sim:
            await wait_for(lambda: _settled(sim, 1))
    view = sim.job_view(job_id)
    assert view is not None
    assert view["status"] == "done"
    assert [w["state"] for w in view["webhooks"]] == ["delivered"]


def test_a_webhook_url_needs_a_valid_secret_and_errors_do_not_show_it() -> None:
    with pytest.raises(ConfigError, match="secret"):
        Simulator("reducto", api_key=API_KEY, webhook_url="http://127.0.0.1:9/hook")
    with pytest.raises(ConfigError) as caught:
        Simulator(
            "reducto", api_key=API_KEY, webhook_url="http://127.0.0.1:9/h", secret="whsec_abc"
        )
    assert "whsec_abc" not in str(caught.value)


def test_secrets_stay_out_of_reprs() -> None:
    sim = Simulator(
        "docurift",
        api_key=API_KEY,
        webhook_url="http://127.0.0.1:9/h",
        secret=SECRET,
        native_secret=NATIVE,
    )
    text = repr(sim) + repr(sim.sender.settings)
    for secret in (API_KEY, SECRET, NATIVE):
        assert secret not in text
