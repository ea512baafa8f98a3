"""The handler loader: built-ins, "module:attr", entry points, and one test per failure."""

from __future__ import annotations

import importlib
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from handlers.base import ENTRY_POINT_GROUP, load_handler
from handlers.command import CommandHandler
from handlers.file import FileHandler
from handlers.http import HttpHandler
from handlers.log import LogHandler
from receiver.config.settings import HandlerSettings
from receiver.errors import HandlerLoadError
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from receiver.completion import Completion

PLUGIN = '''
class Recorder:
    """A third-party handler: remembers what it was given."""

    def __init__(self, name, prefix="seen"):
        self.name = name
        self.prefix = prefix
        self.seen = []

    async def handle(self, completion):
        self.seen.append(f"{self.prefix}:{completion.job_id}")


class NoHandle:
    def __init__(self, name):
        self.name = name


class SyncHandle:
    def __init__(self, name):
        self.name = name

    def handle(self, completion):
        pass


def exploding(name):
    raise RuntimeError("cannot reach the broker")


factories = type("Namespace", (), {"recorder": Recorder})
'''


def entry(**values: Any) -> HandlerSettings:
    return HandlerSettings.model_validate({"name": "h1", **values})


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A directory on sys.path holding a plugin module with a unique name."""
    module = f"jobhook_plugin_{uuid.uuid4().hex[:8]}"
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    yield site, module
    sys.modules.pop(module, None)


def install_entry_point(site: Path, dist: str, name: str, target: str) -> None:
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")
    importlib.invalidate_caches()


@pytest.mark.parametrize(
    ("options", "cls"),
    [({"type": "file", "dir": "out"}, FileHandler),
     ({"type": "http", "url": "https://example.com/hook", "secret": SECRET}, HttpHandler),
     ({"type": "command", "command": [sys.executable, "-c", "pass"]}, CommandHandler),
     ({"type": "log", "level": "debug"}, LogHandler)],
)  # fmt: skip
def test_builtin_names_load(options: dict[str, Any], cls: type) -> None:
    handler = load_handler(entry(**options))
    assert isinstance(handler, cls)
    assert handler.name == "h1"


async def test_a_module_attr_spec_loads_with_the_entry_options(
    plugin_dir: tuple[Path, str], make_completion: Callable[..., Completion]
) -> None:
    _, module = plugin_dir
    handler = load_handler(entry(type=f"{module}:Recorder", prefix="got"))
    await handler.handle(make_completion("job-1"))
    assert handler.seen == ["got:job-1"]


def test_a_dotted_attr_loads(plugin_dir: tuple[Path, str]) -> None:
    _, module = plugin_dir
    handler = load_handler(entry(type=f"{module}:factories.recorder"))
    assert type(handler).__name__ == "Recorder"


async def test_an_entry_point_in_the_jobhook_group_loads(
    plugin_dir: tuple[Path, str], make_completion: Callable[..., Completion]
) -> None:
    site, module = plugin_dir
    kind = f"recorder-{uuid.uuid4().hex[:6]}"
    install_entry_point(site, f"{module}_dist", kind, f"{module}:Recorder")
    handler = load_handler(entry(type=kind))
    await handler.handle(make_completion("job-ep"))
    assert handler.seen == ["seen:job-ep"]


def test_an_entry_point_that_fails_to_load_names_the_handler(
    plugin_dir: tuple[Path, str],
) -> None:
    site, module = plugin_dir
    kind = f"broken-{uuid.uuid4().hex[:6]}"
    install_entry_point(site, f"{module}_broken", kind, f"{module}:Missing")
    with pytest.raises(HandlerLoadError, match=rf"handler 'h1': entry point '{kind}' failed"):
        load_handler(entry(type=kind))


def test_an_unknown_type_names_the_handler() -> None:
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': unknown handler type 'nope'"):
        load_handler(entry(type="nope"))


def test_a_missing_module_names_the_handler() -> None:
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': module 'no_such_mod_jh' not found"):
        load_handler(entry(type="no_such_mod_jh:Thing"))


def test_a_module_whose_import_fails_names_the_handler_and_the_cause(
    plugin_dir: tuple[Path, str],
) -> None:
    site, _ = plugin_dir
    name = f"jobhook_badimport_{uuid.uuid4().hex[:8]}"
    (site / f"{name}.py").write_text("import no_such_dependency_jh\n")
    (site / f"{name}_raises.py").write_text("raise RuntimeError('config missing')\n")
    importlib.invalidate_caches()
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': importing .* failed: No module"):
        load_handler(entry(type=f"{name}:X"))
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': importing .*RuntimeError: config"):
        load_handler(entry(type=f"{name}_raises:X"))


def test_a_missing_attr_names_the_handler(plugin_dir: tuple[Path, str]) -> None:
    _, module = plugin_dir
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': .* has no attribute 'Nope'"):
        load_handler(entry(type=f"{module}:Nope"))


@pytest.mark.parametrize(
    ("options", "reason"),
    [({"type": "file"}, "dir: required, and missing; add it"),
     ({"type": "file", "dir": "out", "dirr": "x"}, "dirr: unknown key; did you mean 'dir'\\?"),
     ({"type": "http", "url": "ftp://example.com"}, "url: must be an http"),
     ({"type": "http", "url": "https://example.com", "secret": "nope"}, "secret: "),
     ({"type": "log", "level": "loud"}, "level: ")],
)  # fmt: skip
def test_bad_options_name_the_handler(options: dict[str, Any], reason: str) -> None:
    with pytest.raises(HandlerLoadError, match=rf"handler 'h1' \({options['type']}\): .*{reason}"):
        load_handler(entry(**options))


@pytest.mark.parametrize(
    "options",
    [{"type": "file", "dir": "out"},
     {"type": "http", "url": "https://example.com/hook"},
     {"type": "command", "command": [sys.executable, "-c", "pass"]},
     {"type": "log"},
     {"type": "redis", "stream": "s"},
     {"type": "nats", "subject": "a.b"},
     {"type": "rabbitmq", "url": "amqp://guest:guest@127.0.0.1/", "queue": "q"}],
    ids=lambda options: options["type"],
)  # fmt: skip
def test_an_unknown_option_is_refused_naming_the_key(options: dict[str, Any]) -> None:
    with pytest.raises(HandlerLoadError) as caught:
        load_handler(entry(**options, colour="blue"))
    assert str(caught.value).startswith(
        f"handler 'h1' ({options['type']}): colour: unknown key; this table takes "
    )


def test_a_factory_that_raises_anything_else_names_the_handler(
    plugin_dir: tuple[Path, str],
) -> None:
    _, module = plugin_dir
    with pytest.raises(HandlerLoadError, match=r"handler 'h1' .*RuntimeError: cannot reach"):
        load_handler(entry(type=f"{module}:exploding"))


@pytest.mark.parametrize("attr", ["NoHandle", "SyncHandle"])
def test_an_object_without_an_async_handle_names_the_handler(
    plugin_dir: tuple[Path, str], attr: str
) -> None:
    _, module = plugin_dir
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': .* 'async handle\(completion\)'"):
        load_handler(entry(type=f"{module}:{attr}"))


def test_a_spec_without_an_attr_names_the_handler() -> None:
    with pytest.raises(HandlerLoadError, match=r"handler 'h1': .* must be in the form"):
        load_handler(entry(type="somemodule:"))
