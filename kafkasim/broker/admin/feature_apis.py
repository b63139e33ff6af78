"""UpdateFeatures 0-1 as a Kafka 3.9.1 broker in ZooKeeper mode answers it (KafkaApis
.handleUpdateFeatures, KafkaController.processFeatureUpdates; checked with `realkafka`).

A ZooKeeper-mode 3.9 broker supports no feature (ApiVersions lists none) and has none
finalized, so every update fails on its own (INVALID_REQUEST with Kafka's reason) and the
/feature znode is never rewritten. A broker that is not the active controller answers
NOT_CONTROLLER at the top level with no results. A repeated feature counts once, the first
(the request's collection is keyed by name); results come in the Scala mutable.HashMap's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.broker.zk.java_compat import java_hash_order
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafkasim.protocol.primitives import Message

VERSIONS: dict[int, tuple[int, int]] = {A.UPDATE_FEATURES: (0, 1)}
UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3   # FeatureUpdate.UpgradeType
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


def _upgrade_type(version: int, item: Any) -> int:
    if version == 0:
        return SAFE_DOWNGRADE if item.allow_downgrade else UPGRADE
    return item.upgrade_type if item.upgrade_type in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE) else UNKNOWN


def feature_update_error(feature: str, level: int, upgrade_type: int) -> str:
    """validateFeatureUpdate with no finalized feature and no supported one: the reason."""
    if feature == "":
        return "Feature name can not be empty."
    if upgrade_type == UNKNOWN:
        return "Received unknown upgrade type."
    if level < 1 and upgrade_type != UPGRADE:
        return "Can not delete non-existing finalized feature."
    if level < 1:
        return (f"Can not provide versionLevel: {level} less than 1 without setting the SAFE downgradeType "
                "in the request.")
    return "Could not apply finalized feature update because the provided feature is not supported."


class FeatureApis:
    def __init__(self, is_controller: Callable[[], bool]) -> None:
        self.is_controller = is_controller

    def handlers(self) -> dict[int, Any]:
        return {A.UPDATE_FEATURES: self.update_features}

    async def update_features(self, header: RequestHeader, req: UpdateFeaturesRequest) -> Message:
        if not self.is_controller():
            return UpdateFeaturesResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER,
                                          error_message=NOT_CONTROLLER_MESSAGE, results=[])
        errors: dict[str, str] = {}
        for item in req.feature_updates:
            if item.feature in errors:
                continue  # the request's collection is keyed by feature: the first one stays
            errors[item.feature] = feature_update_error(item.feature, item.max_version_level,
                                                        _upgrade_type(header.request_api_version, item))
        R = UpdateFeaturesResponse.UpdatableFeatureResult
        results = [R(feature=f, error_code=E.INVALID_REQUEST, error_message=errors[f])
                   for f in java_hash_order(errors, scala=True)]
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None, results=results)
