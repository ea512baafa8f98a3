"""Settings: TOML and JOBHOOK_* variables, validated once into frozen sections."""

from receiver.config.load import load_settings
from receiver.config.settings import (
    DEFAULT_CONFIG,
    ENV_PREFIX,
    DispatchSettings,
    HandlerSettings,
    LogSettings,
    PollSettings,
    ResultsSettings,
    RetentionSettings,
    ServerSettings,
    Settings,
    SourceSettings,
    StoreSettings,
)

__all__ = [
    "DEFAULT_CONFIG",
    "ENV_PREFIX",
    "DispatchSettings",
    "HandlerSettings",
    "LogSettings",
    "PollSettings",
    "ResultsSettings",
    "RetentionSettings",
    "ServerSettings",
    "Settings",
    "SourceSettings",
    "StoreSettings",
    "load_settings",
]
