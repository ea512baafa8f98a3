"""The CLI's ServiceClient over ``receiver.client``: a URL that is not http(s) is bad input."""

from __future__ import annotations

from click.testing import CliRunner

from receiver.cli.main import main


def test_a_url_without_its_scheme_exits_2_naming_the_option() -> None:
    result = CliRunner().invoke(
        main, ["jobs", "ls", "--url", "jobhook.internal:8000"], env={"JOBHOOK_CONFIG": None}
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "jobhook: --url: the jobhook URL must start with http:// or https://, not "
        "'jobhook.internal:8000'\n"
    )
