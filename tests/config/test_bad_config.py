"""Any configuration (known keys, misspelt keys, values of any TOML type) is accepted or refused
with a ConfigError whose every line is ``key: what is wrong``; never another exception, and the
lines never show a value (it may be a secret)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from receiver.config.load import load_settings
from receiver.config.settings import Settings
from receiver.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

MARKER = "zq-value-zq"
"""Every generated string holds this, so a line that repeats a value is caught."""
SECTIONS = {name: list(field.annotation.model_fields)  # type: ignore[union-attr]
            for name, field in Settings.model_fields.items()
            if hasattr(field.annotation, "model_fields")}  # fmt: skip
VALUES = (
    st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12).map(lambda text: MARKER + text)
)
VALUE = VALUES | st.lists(VALUES, max_size=3)


def _key(known: list[str]) -> st.SearchStrategy[str]:
    typo = st.sampled_from(known).map(lambda key: key[1:] + key[0] if len(key) > 1 else key + "x")
    return st.sampled_from(known) | typo


@st.composite
def configs(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    tables = draw(st.lists(st.sampled_from(sorted(SECTIONS)), max_size=4, unique=True))
    return {
        table: draw(st.dictionaries(_key(SECTIONS[table]), VALUE, max_size=4)) for table in tables
    }


def toml(config: dict[str, dict[str, Any]], tmp: Path) -> str:
    lines = [f'data_dir = "{tmp}"']
    for table, values in config.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    """A TOML value: JSON's numbers and booleans; strings escaped as TOML wants (no control
    character, DEL included, unescaped; no surrogate-pair escapes, which JSON would write)."""
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if not isinstance(value, str):
        return json.dumps(value)
    escaped = "".join(
        f"\\u{ord(char):04x}" if ord(char) < 0x20 or ord(char) == 0x7F
        else "\\" + char if char in '"\\' else char
        for char in value
    )  # fmt: skip
    return f'"{escaped}"'


LINE = re.compile(r"^  (JOBHOOK_\w+ \()?[a-z_]+(\.[a-z_0-9]+| #[0-9]+)*\)?: \S.*$")


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs())
@example(config={"dispatch": {"concurrency": MARKER + "\x7f"}})  # DEL must be escaped in TOML
def test_any_config_is_settings_or_one_line_per_problem(
    config: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    path = tmp_path / "jobhook.toml"
    path.write_text(toml(config, tmp_path), encoding="utf-8")
    try:
        load_settings(path, environ={})
    except ConfigError as exc:
        heading, *lines = str(exc).splitlines()
        assert heading == f"invalid config {path}:"
        assert lines
        for line in lines:
            assert LINE.match(line), line
            assert MARKER not in line, line
