"""Kafka's configs in one table (definitions.py) and the typed objects built from it
(fields.py). A pure package: storage/ and broker/ import it, it imports neither."""

from kafkasim.config.definitions import (
    BROKER,
    BROKER_CONFIGS,
    BROKER_KEYS,
    DESCRIBED_BROKER_CONFIGS,
    TOPIC,
    TOPIC_CONFIGS,
    TOPIC_KEYS,
    ConfigKey,
)
from kafkasim.config.fields import (
    UnknownConfigError,
    build,
    check_names,
    config_fields,
    field_values,
    key_of,
    setting,
    typed,
)

__all__ = ["BROKER", "BROKER_CONFIGS", "BROKER_KEYS", "DESCRIBED_BROKER_CONFIGS", "TOPIC", "TOPIC_CONFIGS",
           "TOPIC_KEYS", "ConfigKey", "UnknownConfigError", "build", "check_names", "config_fields", "field_values",
           "key_of", "setting", "typed"]
