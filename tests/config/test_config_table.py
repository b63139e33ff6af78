"""The config table (kafkasim.config) and the typed objects built from it map one to one: every
definition has its typed field, every config field has its definition, with the table's type
and default — and values go from properties to fields and back unchanged."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest

from kafkasim.broker.config import (
    BrokerConfig,
    ControllerConfig,
    GroupCoordinatorConfig,
    ReplicationConfig,
    TransactionConfig,
)
from kafkasim.config import (
    BROKER,
    BROKER_CONFIGS,
    TOPIC,
    TOPIC_CONFIGS,
    ConfigKey,
    UnknownConfigError,
    build,
    config_fields,
    typed,
)
from kafkasim.config.fields import NAMES, SCOPE
from kafkasim.config.types import BOOLEAN, DOUBLE, INTEGRAL, ConfigValueError, to_string
from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManagerConfig

pytestmark = pytest.mark.unit

VIEWS = (ReplicationConfig, LogManagerConfig, ControllerConfig, GroupCoordinatorConfig, TransactionConfig)
# BrokerConfig fields that are not Kafka configs: where it listens, and what server.properties set.
NOT_CONFIGS = {"host", "port", "properties", "client_quotas", "listener_overrides"}
# Where kafkasim's default is not Kafka's (each explained where the field is declared).
KAFKASIM_DEFAULTS = {"broker.id", "log.dirs", "listeners", "offsets.topic.replication.factor",
                     "transaction.state.log.replication.factor", "transaction.state.log.min.isr"}


def _python_type(key: ConfigKey) -> Any:
    base: Any = bool if key.type == BOOLEAN else int if key.type in INTEGRAL else float if key.type == DOUBLE else str
    return base | None if key.default is None else base


def _names(cls: type) -> list[str]:
    return [n for f in config_fields(cls) for n in f.metadata[NAMES]]


def test_every_topic_config_is_one_log_config_field_and_back() -> None:
    assert sorted(_names(LogConfig)) == sorted(k.name for k in TOPIC_CONFIGS)
    hints = typing.get_type_hints(LogConfig)
    for f in dataclasses.fields(LogConfig):
        assert f.metadata[SCOPE] == TOPIC and f.metadata[NAMES] == (f.name.replace("_", "."),)
        key = next(k for k in TOPIC_CONFIGS if k.name == f.metadata[NAMES][0])
        assert hints[f.name] == _python_type(key), f.name
        assert f.default == typed(key, key.default), f.name


def test_every_broker_config_is_one_broker_config_field_and_back() -> None:
    names = _names(BrokerConfig)
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(k.name for k in BROKER_CONFIGS)
    hints = typing.get_type_hints(BrokerConfig)
    for f in dataclasses.fields(BrokerConfig):
        if f.name in NOT_CONFIGS:
            assert NAMES not in f.metadata
            continue
        assert f.metadata[SCOPE] == BROKER
        key = next(k for k in BROKER_CONFIGS if k.name == f.metadata[NAMES][0])
        if key.name not in KAFKASIM_DEFAULTS:
            assert hints[f.name] == _python_type(key), f.name
            assert f.default == typed(key, key.default), f.name


@pytest.mark.parametrize("view", VIEWS, ids=lambda c: c.__name__)
def test_the_parts_configs_are_views_of_the_broker_config(view: type) -> None:
    broker_hints, hints = typing.get_type_hints(BrokerConfig), typing.get_type_hints(view)
    broker_fields = {f.metadata[NAMES][0]: f for f in config_fields(BrokerConfig)}
    assert [f.name for f in dataclasses.fields(view)] == [f.name for f in config_fields(view)]
    for f in config_fields(view):
        own = broker_fields[f.metadata[NAMES][0]]
        assert (hints[f.name], f.default) == (broker_hints[own.name], own.default), f.name
    assert BrokerConfig().view(view) == view()


def test_broker_defaults_give_the_topic_defaults() -> None:
    assert BrokerConfig().log_config() == LogConfig()


def test_values_go_from_properties_to_fields_and_back() -> None:
    for key in BROKER_CONFIGS:
        if key.default is not None:
            cfg = BrokerConfig.from_properties({key.name: key.default})
            holder = next(f.name for f in config_fields(BrokerConfig) if key.name in f.metadata[NAMES])
            assert to_string(key.type, getattr(cfg, holder)) == key.default, key.name
            assert cfg.properties == {key.name}
    for key in TOPIC_CONFIGS:
        assert key.default is not None
        log = build(LogConfig, {key.name: key.default})
        assert to_string(key.type, getattr(log, key.name.replace(".", "_"))) == key.default, key.name


def test_typed_values_from_toml_and_strings() -> None:
    cfg = BrokerConfig.from_properties({"num.partitions": "3", "log.preallocate": True, "log.retention.ms": 5,
                                        "log.cleaner.min.cleanable.ratio": "0.25", "broker.rack": "",
                                        "controlled.shutdown.enable": "false", "host": "h", "port": "1"})
    assert (cfg.num_partitions, cfg.log_preallocate, cfg.log_retention_ms) == (3, True, 5)
    assert (cfg.log_cleaner_min_cleanable_ratio, cfg.rack, cfg.controlled_shutdown_enable) == (0.25, None, False)
    assert (cfg.host, cfg.port) == ("h", 1)
    with pytest.raises(ConfigValueError, match="Invalid value maybe for configuration log.preallocate"):
        BrokerConfig.from_properties({"log.preallocate": "maybe"})
    with pytest.raises(ConfigValueError, match="num.partitions"):
        BrokerConfig.from_properties({"num.partitions": True})


def test_an_unknown_name_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(UnknownConfigError, match=r"unknown broker config 'log.retention.hour' "
                                                 r"\(did you mean 'log.retention.hours'\?\)"):
        BrokerConfig.from_properties({"log.retention.hour": 1})
    with pytest.raises(UnknownConfigError, match=r"^unknown broker config 'zzz'$"):
        BrokerConfig.from_properties({"zzz": 1})


@pytest.mark.parametrize("config,message", [
    ("num.partitons=3", "kafkasim: serve: --config: unknown broker config 'num.partitons' "
                        "(did you mean 'num.partitions'?)"),
    ("num.partitions=x", "kafkasim: serve: --config: Invalid value x for configuration num.partitions"),
])
def test_serve_refuses_a_bad_config_with_exit_2(config: str, message: str, tmp_path: Any,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kafkasim.cli import main

    assert main(["serve", "--log-dir", str(tmp_path), "--config", config]) == 2
    assert message in capsys.readouterr().err
