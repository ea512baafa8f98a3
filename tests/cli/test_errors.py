"""Every refusal a newcomer meets on the command line is one line naming the option or key and
the fix; none is a traceback. (Configuration refusals: tests/service/test_preflight.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from receiver.cli.main import main
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["--drop", "1.5"], "Invalid value for '--drop': 1.5 is not in the range 0.0<=x<=1.0."),
     (["--drop", "-0.1"], "Invalid value for '--drop': -0.1 is not in the range 0.0<=x<=1.0."),
     (["--jobs", "0"], "Invalid value for '--jobs': 0 is not in the range 1<=x<=1000."),
     (["--jobs", "-3"], "Invalid value for '--jobs': -3 is not in the range 1<=x<=1000."),
     (["--seconds", "1"], "Invalid value for '--seconds': 1.0 is not in the range x>=15.0."),
     (["--jobs", "many"], "Invalid value for '--jobs': 'many' is not a valid integer range.")],
    ids=["drop-above-1", "drop-negative", "jobs-zero", "jobs-negative", "seconds-too-few",
         "jobs-text"],
)  # fmt: skip
def test_demo_refuses_a_bad_option_in_one_line_before_it_starts(
    args: list[str], expected: str
) -> None:
    result = CliRunner().invoke(main, ["demo", *args])
    assert result.exit_code == 2
    assert expected in result.stderr
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_jobs_ls_on_a_mistyped_data_dir_refuses_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "dta"
    config = tmp_path / "jobhook.toml"
    config.write_text(f'data_dir = "{missing}"\n')
    result = CliRunner().invoke(
        main, ["jobs", "ls", "--config", str(config)], env={"JOBHOOK_URL": None}
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"jobhook: no store at {missing}/jobhook.db (the data_dir or store.url of {config}); "
        "correct it, or run `jobhook serve` with this configuration first\n"
    )
    assert not missing.exists()


def test_an_unknown_key_suggests_the_known_one(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text("[server]\nprot = 8000\n")
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == ["  server.prot: unknown key; did you mean 'port'?"]


def test_secret_instead_of_secrets_points_at_secrets_only(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(f'[sources.reducto]\nprovider = "reducto"\nsecret = ["{SECRET}"]\n')
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == [
        "  sources.reducto.secret: unknown key; did you mean 'secrets'?"
    ]


def test_a_bad_environment_variable_is_named_not_the_file(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text("[server]\nport = 8000\n")
    result = CliRunner().invoke(
        main, ["check-config", "--config", str(config)], env={"JOBHOOK_SERVER__PORT": "abc"}
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == [
        "  JOBHOOK_SERVER__PORT (server.port): must be a valid integer, unable to parse string "
        "as an integer; fix or unset JOBHOOK_SERVER__PORT"
    ]


BAD_DEMO_OPTIONS = st.one_of(
    st.tuples(st.just("--jobs"), st.integers(max_value=0) | st.integers(min_value=1001)),
    st.tuples(st.just("--drop"), st.floats(allow_nan=False).filter(lambda x: not 0 <= x <= 1)),
    st.tuples(st.just("--seconds"), st.floats(max_value=14.99, allow_nan=False)),
    st.tuples(
        st.sampled_from(["--jobs", "--drop", "--seconds"]),
        st.text(alphabet="abcxyz_ ", min_size=1, max_size=6),
    ),
)


@settings(max_examples=40, deadline=None)
@given(option_value=BAD_DEMO_OPTIONS)
def test_any_bad_demo_option_is_one_usage_line(option_value: tuple[str, object]) -> None:
    option, value = option_value
    result = CliRunner().invoke(main, ["demo", option, str(value)])
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.stderr
    assert "Traceback" not in result.output
