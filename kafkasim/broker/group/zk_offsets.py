"""Offsets of OffsetCommit v0 / OffsetFetch v0, which a ZooKeeper-mode Kafka 3.9 broker still keeps
in ZooKeeper rather than in __consumer_offsets (KafkaApis.commitOffsetsToZookeeper and
handleOffsetFetchRequestFromZookeeper; KafkaZkClient.setOrCreateConsumerOffset/getConsumerOffset).

    /consumers/<group>/offsets/<topic>/<partition>    the offset as decimal text (UTF-8)

No group membership, generation or metadata is stored or checked for these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.runtime.api import NodeExistsError, NoNodeError

if TYPE_CHECKING:
    from kafkasim.runtime.api import ZkClient

CONSUMERS_PATH = "/consumers"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS_PATH}/{group}/offsets/{topic}/{partition}"


class ZkConsumerOffsets:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def set_or_create(self, group: str, topic: str, partition: int, offset: int) -> None:
        path, data = consumer_offset_path(group, topic, partition), str(offset).encode()
        try:
            await self.zk.set(path, data)
            return
        except NoNodeError:
            pass  # (no await in an except block: kafka_zk_client._get_or_none says why)
        try:
            await self.zk.create(path, data, makepath=True)
            return
        except NodeExistsError:   # created meanwhile by another commit: it wins, as in Kafka
            pass
        await self.zk.set(path, data)

    async def get(self, group: str, topic: str, partition: int) -> int | None:
        try:
            data, _ = await self.zk.get(consumer_offset_path(group, topic, partition))
        except NoNodeError:
            return None
        try:
            return int(data.decode())
        except ValueError:
            return None
