"""A provider's own sub-table: ``table_model`` says which, and one ``from_settings`` checks it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from receiver.providers import PROVIDERS, get_provider
from receiver.providers.azure import AzureOptions
from receiver.providers.google import GcpOptions
from receiver.providers.landingai import LandingAIOptions
from receiver.providers.textract import AwsSettings

if TYPE_CHECKING:
    from pydantic import BaseModel

TOPIC = "arn:aws:sns:eu-west-1:123456789012:textract"
TABLES: dict[str, BaseModel] = {
    "azure-docintel": AzureOptions(model_id="prebuilt-layout"),
    "google-docai": GcpOptions(location="eu"),
    "landingai": LandingAIOptions(jobs="extract", zero_data_retention=True),
    "textract": AwsSettings(region="eu-west-1", topic_arns=(TOPIC,)),
}


def _table_of(provider: Any) -> Any:
    return provider.settings if provider.name == "textract" else provider.options


def test_the_providers_with_a_table_are_those_that_name_its_model() -> None:
    with_model = {name for name, cls in PROVIDERS.items() if cls.table_model is not None}
    assert with_model == {*TABLES, "generic"}  # the generic table: tests/providers/test_generic
    for name in TABLES:
        assert PROVIDERS[name].table_name is not None


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_table_reaches_the_adapter(name: str) -> None:
    assert _table_of(get_provider(name, table=TABLES[name])) is TABLES[name]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_table_of_another_provider_is_a_type_error(name: str) -> None:
    other = next(table for key, table in TABLES.items() if key != name)
    wanted = f"a [{PROVIDERS[name].table_name}] table"
    message = rf"provider '{name}' takes {wanted}, not {type(other).__name__}"
    with pytest.raises(TypeError, match=message.replace("[", r"\[")):
        get_provider(name, table=other)


def test_a_provider_without_a_table_refuses_one() -> None:
    with pytest.raises(TypeError, match=r"provider 'reducto' takes no sub-table, not GcpOptions"):
        get_provider("reducto", table=TABLES["google-docai"])


@pytest.mark.parametrize("name", ["azure-docintel", "google-docai", "landingai"])
def test_without_a_table_the_adapter_keeps_its_defaults(name: str) -> None:
    model = PROVIDERS[name].table_model
    assert model is not None
    assert get_provider(name).options == model()  # type: ignore[attr-defined]
