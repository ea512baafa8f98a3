"""``Runtime.attach``: a verifier that reaches the network gets its source's one client, at start
and again for each verifier a reload builds; a verifier that does not is left alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from receiver.config.load import load_settings
from receiver.intake.webhooks import Source
from receiver.providers import get_provider
from receiver.service.runtime import Runtime
from receiver.signatures.base import AsyncVerifier
from receiver.signatures.svix import SvixVerifier
from tests.support import SECRET
from tests.textract_support import REGION, TOPIC, aws_env

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

    from receiver.signatures.base import Verified

__all__ = ["aws_env"]


class Recording(AsyncVerifier):
    """Records what it is attached to; verifies nothing."""

    def __init__(self) -> None:
        self.attached: list[tuple[httpx.AsyncClient, object]] = []

    def attach(
        self, client: httpx.AsyncClient, acquire: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.attached.append((client, acquire))

    async def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        raise NotImplementedError


def _runtime(tmp_path: Path) -> Runtime:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        '[sources.tx]\nprovider = "textract"\napi_base_url = "http://127.0.0.1:9"\n'
        f'[sources.tx.aws]\nregion = "{REGION}"\ntopic_arns = ["{TOPIC}"]\n'
        f'[sources.rd]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n'
    )
    return Runtime(load_settings(config, environ={}), {})


async def test_each_reloaded_verifier_gets_the_sources_one_client(
    tmp_path: Path, aws_env: None
) -> None:
    runtime = _runtime(tmp_path)
    await runtime.start()
    try:
        first, second = Recording(), Recording()
        textract = get_provider("textract", table=runtime.settings.sources["tx"].table)
        runtime.attach({"tx": Source("tx", textract, first)})
        runtime.attach({"tx": Source("tx", textract, second)})  # what a reload does
        (client, acquire), (again, acquire_again) = first.attached[0], second.attached[0]
        assert client is again  # one client per source, not one more per reload
        assert not client.is_closed
        assert acquire is not None  # the job API's budget
        assert acquire_again is not None
    finally:
        await runtime.stop()
    assert client.is_closed  # closed with the runtime


async def test_a_verifier_that_fetches_nothing_is_not_attached(
    tmp_path: Path, aws_env: None
) -> None:
    runtime = _runtime(tmp_path)
    await runtime.start()
    try:
        svix = SvixVerifier(runtime.settings.sources["rd"].secrets)
        runtime.attach({"rd": Source("rd", get_provider("reducto"), svix)})  # no attach to call
        unknown = Recording()
        runtime.attach({"gone": Source("gone", get_provider("reducto"), unknown)})
        assert unknown.attached == []  # a source the settings do not name
    finally:
        await runtime.stop()
