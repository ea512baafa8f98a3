"""Secrets rotated on a running ``jobhook serve``: SIGHUP after editing the TOML, a rewritten
``file:`` secret and a Kubernetes-style ``..data`` symlink swap, with webhooks signed by the old
and the new secret arriving all along; a bad reload refused and the running config kept."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.reliability.service import Service
from tests.support import OLD_SECRET, SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

NEW_SECRET = SECRET
OLD_TOKEN = "admin-token-old-5f1e0c7a"
NEW_TOKEN = "admin-token-new-9b2d4e81"
_ids = itertools.count()


def _config(tmp_path: Path, secrets: list[str], *, token: str = OLD_TOKEN, extra: str = "") -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{token}"
reload_watch_seconds = 0.2
{extra}
[sources.reducto]
provider = "reducto"
secrets = {json.dumps(secrets)}
""",
        encoding="utf-8",
    )
    return config


@dataclass
class Sender:
    """A provider sending webhooks without pause, each signed with its ``secret`` of the moment;
    every answer kept."""

    url: str
    secret: str
    answers: list[tuple[str, int, str]] = field(default_factory=list)  # (secret, status, status)

    async def run(self, stop: asyncio.Event, workers: int = 4) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            await asyncio.gather(*(self._worker(client, stop) for _ in range(workers)))

    async def _worker(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        while not stop.is_set():
            n = next(_ids)
            secret = self.secret
            body = reducto_body(f"job-{n}")
            headers = signed_headers(body, secret=secret, msg_id=f"msg_rot{n}")
            response = await client.post("/webhooks/reducto", content=body, headers=headers)
            status = response.json().get("status", "") if response.status_code == 200 else ""
            self.answers.append((secret, response.status_code, status))
            await asyncio.sleep(0.005)


async def _post(url: str, secret: str) -> int:
    n = next(_ids)
    body = reducto_body(f"one-{n}")
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        headers = signed_headers(body, secret=secret, msg_id=f"msg_one{n}")
        response = await client.post("/webhooks/reducto", content=body, headers=headers)
    return response.status_code


def _events(service: Service, name: str) -> list[dict[str, object]]:
    found = []
    for line in service.log_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("event") == name:
                found.append(record)
    return found


RESTART = "restart needed for server.max_body_bytes"


async def _until_logged(service: Service, name: str, count: int, timeout: float = 15) -> None:
    async with asyncio.timeout(timeout):
        while len(_events(service, name)) < count:
            await asyncio.sleep(0.05)


def _hangup(service: Service) -> None:
    assert service.process is not None
    service.process.send_signal(signal.SIGHUP)


def _stored(tmp_path: Path) -> int:
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "jobhook.db")) as db:
        (count,) = db.execute("SELECT count(*) FROM deliveries").fetchone()
    return int(count)


async def _jobs_status(url: str, token: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.get("/jobs", headers={"Authorization": f"Bearer {token}"})
    return response.status_code


@pytest.mark.timeout(90)
async def test_sighup_after_editing_the_toml_rotates_secrets_and_token_under_load(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    config = _config(tmp_path, [OLD_SECRET])
    service = Service(config, tmp_path / "serve.log")
    service.start()
    try:
        await service.wait_ready()
        sender = Sender(service.url, OLD_SECRET)
        stop = asyncio.Event()
        load = asyncio.create_task(sender.run(stop))
        await asyncio.sleep(0.3)
        # 1. add the new secret (and rotate the admin token) beside the old one
        _config(tmp_path, [NEW_SECRET, OLD_SECRET], token=NEW_TOKEN)
        _hangup(service)
        await _until_logged(service, "reloaded", 1)
        await asyncio.sleep(0.3)
        # 2. the provider switches to the new secret
        sender.secret = NEW_SECRET
        await asyncio.sleep(0.3)
        # 3. remove the old secret
        _config(tmp_path, [NEW_SECRET], token=NEW_TOKEN)
        _hangup(service)
        await _until_logged(service, "reloaded", 2)
        await asyncio.sleep(0.3)
        stop.set()
        await load
        old_refused = await _post(service.url, OLD_SECRET)
        tokens = (
            await _jobs_status(service.url, OLD_TOKEN),
            await _jobs_status(service.url, NEW_TOKEN),
        )

        # A bad configuration (a malformed secret) and a change that needs a restart: refused,
        # their lines logged, the running configuration kept.
        _config(tmp_path, ["whsec_not-base64!"], token=NEW_TOKEN)
        _hangup(service)
        await _until_logged(service, "reload_refused", 1)
        _config(tmp_path, [NEW_SECRET], token=NEW_TOKEN, extra="max_body_bytes = 2048")
        _hangup(service)
        # The file watcher (every 0.2 s) and SIGHUP may both reload one edit: wait for the
        # second edit's refusal itself, not for a count of refusals.
        async with asyncio.timeout(15):
            while not any(e["problems"] == [RESTART] for e in _events(service, "reload_refused")):
                await asyncio.sleep(0.05)
        still = await _post(service.url, NEW_SECRET)
        alive = service.process is not None and service.process.poll() is None
        assert await service.stop() == 0
    finally:
        service.close()

    statuses = {(secret == OLD_SECRET, code) for secret, code, _ in sender.answers}
    old_count = sum(secret == OLD_SECRET for secret, _, _ in sender.answers)
    report_figures(
        f"{len(sender.answers)} webhooks from 4 concurrent senders across two SIGHUP reloads "
        f"({old_count} signed with the old secret, {len(sender.answers) - old_count} with the "
        f"new): {sum(code != 200 for _, code, _ in sender.answers)} refused"
    )
    assert all(code == 200 for _, code, _ in sender.answers), statuses
    assert all(status == "accepted" for _, _, status in sender.answers)
    assert {secret for secret, _, _ in sender.answers} == {OLD_SECRET, NEW_SECRET}
    # Nothing lost or counted twice: every acknowledged webhook is one stored delivery.
    assert _stored(tmp_path) == len(sender.answers) + 1
    assert old_refused == 401
    assert tokens == (401, 200)
    refused = _events(service, "reload_refused")
    bad_secret = [e for e in refused if e["problems"] != [RESTART]]
    assert bad_secret, refused
    for event in bad_secret:  # the malformed secret's refusal, once or twice (watcher, SIGHUP)
        assert any("sources.reducto" in line for line in event["problems"])  # type: ignore[union-attr]
    assert refused[-1]["problems"] == [RESTART]
    assert still == 200
    assert alive, "SIGHUP must not end the service"
    assert NEW_SECRET.removeprefix("whsec_") not in service.log_text()
    assert OLD_TOKEN not in service.log_text()


def _k8s_secret(mount: Path, generation: int, value: str) -> None:
    """What the kubelet does: write a new timestamped directory, then swap the ``..data``
    symlink to it atomically (a rename); the key's own symlink points through ``..data``."""
    version = mount / f"..2026_{generation:02d}"
    version.mkdir()
    (version / "webhook-secret").write_text(value + "\n", encoding="utf-8")
    staging = mount / "..data_tmp"
    staging.symlink_to(version.name)
    os.replace(staging, mount / "..data")
    key = mount / "webhook-secret"
    if not key.is_symlink():
        key.symlink_to("..data/webhook-secret")


@pytest.mark.timeout(90)
async def test_a_rewritten_file_secret_and_a_kubernetes_symlink_swap_reload_without_a_signal(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain-secret"
    plain.write_text(OLD_SECRET, encoding="utf-8")
    mount = tmp_path / "mounted"
    mount.mkdir()
    _k8s_secret(mount, 1, OLD_SECRET)
    config = _config(tmp_path, [f"file:{plain}", f"file:{mount / 'webhook-secret'}"])
    service = Service(config, tmp_path / "serve.log")
    service.start()
    try:
        await service.wait_ready()
        sender = Sender(service.url, OLD_SECRET)
        stop = asyncio.Event()
        load = asyncio.create_task(sender.run(stop))
        await asyncio.sleep(0.3)
        plain.write_text(NEW_SECRET, encoding="utf-8")  # rewritten in place
        await _until_logged(service, "reloaded", 1)
        sender.secret = NEW_SECRET
        await asyncio.sleep(0.3)
        _k8s_secret(mount, 2, NEW_SECRET)
        await _until_logged(service, "reloaded", 2)
        await asyncio.sleep(0.3)
        stop.set()
        await load
        old_refused = await _post(service.url, OLD_SECRET)
        assert await service.stop() == 0
    finally:
        service.close()
    assert sender.answers
    assert all(code == 200 for _, code, _ in sender.answers)
    assert {secret for secret, _, _ in sender.answers} == {OLD_SECRET, NEW_SECRET}
    assert old_refused == 401
    reloads = _events(service, "reloaded")
    assert [r["changed"] for r in reloads] == [["sources.reducto.secrets"]] * 2
