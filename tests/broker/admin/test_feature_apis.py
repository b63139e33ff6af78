"""UpdateFeatures as a ZooKeeper-mode Kafka 3.9.1 answers it (captured with `realkafka`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkasim.broker.admin.feature_apis import FeatureApis
from kafkasim.protocol import api as A
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.update_features import UpdateFeaturesRequest as UF

pytestmark = pytest.mark.unit

K = UF.FeatureUpdateKey
NOT_SUPPORTED = "Could not apply finalized feature update because the provided feature is not supported."
CASES = [
    ([K(feature="metadata.version", max_version_level=1)], [("metadata.version", 42, NOT_SUPPORTED)]),
    ([K(feature="", max_version_level=1)], [("", 42, "Feature name can not be empty.")]),
    ([K(feature="a", max_version_level=0, upgrade_type=1)],
     [("a", 42, "Can not provide versionLevel: 0 less than 1 without setting the SAFE downgradeType in the request.")]),
    ([K(feature="a", max_version_level=0, upgrade_type=2)], [("a", 42, "Can not delete non-existing finalized feature.")]),
    ([K(feature="a", max_version_level=3, upgrade_type=9)], [("a", 42, "Received unknown upgrade type.")]),
    # A repeated feature counts once (the first); the answer in Scala mutable.HashMap order.
    ([K(feature="zz", max_version_level=2), K(feature="aa", max_version_level=0, upgrade_type=2),
      K(feature="zz", max_version_level=0, upgrade_type=1), K(feature="group.version", max_version_level=1)],
     [("aa", 42, "Can not delete non-existing finalized feature."), ("zz", 42, NOT_SUPPORTED),
      ("group.version", 42, NOT_SUPPORTED)]),
]


def _call(apis: FeatureApis, version: int, updates: list[Any]) -> Any:
    header = RequestHeader(request_api_key=A.UPDATE_FEATURES, request_api_version=version, correlation_id=1,
                           client_id="t")
    return asyncio.run(apis.update_features(header, UF(timeout_ms=1000, feature_updates=updates)))


def test_every_update_fails_as_on_a_zookeeper_broker() -> None:
    apis = FeatureApis(lambda: True)
    for updates, expected in CASES:
        r = _call(apis, 1, updates)
        assert (r.error_code, r.error_message) == (0, None)
        assert [(x.feature, x.error_code, x.error_message) for x in r.results] == expected


def test_version_0_reads_allow_downgrade() -> None:
    r = _call(FeatureApis(lambda: True), 0, [K(feature="a", max_version_level=0, allow_downgrade=True)])
    assert [(x.feature, x.error_message) for x in r.results] == [("a", "Can not delete non-existing finalized feature.")]


def test_not_the_controller() -> None:
    r = _call(FeatureApis(lambda: False), 1, [K(feature="a", max_version_level=1)])
    assert (r.error_code, r.error_message, r.results) == (41, "This is not the correct controller for this cluster.", [])
