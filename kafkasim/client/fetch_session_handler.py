"""The client side of fetch sessions (KIP-227), as Kafka 3.9's FetchSessionHandler keeps it for a
follower's fetcher thread: which session the next Fetch names, and which partitions it must
carry. The broker side is kafkasim/broker/fetch_session.py.

The next Fetch's (session_id, session_epoch):

  (0, 0)        INITIAL: no session; a full request (every partition), the broker may open one
  (id, 0)       close `id` and start again: a full request (after an error on session `id`)
  (id, N > 0)   incremental on session `id`: only the partitions added since the last request or
                whose fetch data changed (fetch offset, log start offset, max bytes, current
                leader epoch, last fetched epoch); the ones dropped are listed as forgotten

The answer moves it on (handle_response):

  top-level error             FETCH_SESSION_ID_NOT_FOUND -> INITIAL; any other -> (id, 0). No
                              partition of the answer is used.
  answer to a full request    partitions other than exactly those asked -> INITIAL, unused;
                              session id 0 (sessionless) -> INITIAL; else (new id, 1)
  answer to an incremental    a partition outside the session -> (id, 0), unused; session id 0
                              (the broker closed it) -> INITIAL; else (id, next epoch)

A request that fails on the wire (handle_error) -> (id, 0): the next one is full.
The epoch after Int.MaxValue is 1 (FetchMetadata.nextEpoch).
"""

from __future__ import annotations

from typing import NamedTuple

from kafkasim.protocol import errors as E

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
INT_MAX = 2**31 - 1

TopicPartition = tuple[str, int]


class PartitionData(NamedTuple):
    """FetchRequest.PartitionData: what one partition's entry in a Fetch asks (compared whole to
    decide whether an incremental request must carry it)."""

    topic_id: bytes
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int


class FetchRequestData(NamedTuple):
    """What build() gives: the partitions to send, those to forget, all the session's (what the
    answer's partitions are checked against), and the session id and epoch to send."""

    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicPartition]
    session_partitions: dict[TopicPartition, PartitionData]
    session_id: int
    epoch: int

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # Insertion-ordered as Kafka's LinkedHashMap: the order partitions are sent in.
        self.session_partitions: dict[TopicPartition, PartitionData] = {}

    def build(self, wanted: dict[TopicPartition, PartitionData]) -> FetchRequestData:
        """The next Fetch for `wanted` (the partitions ready to fetch, in order)."""
        if self.epoch == INITIAL_EPOCH:
            self.session_partitions = dict(wanted)
            return FetchRequestData(dict(wanted), [], dict(wanted), self.session_id, self.epoch)
        forget: list[TopicPartition] = []
        altered: dict[TopicPartition, PartitionData] = {}
        for tp, prev in list(self.session_partitions.items()):
            nxt = wanted.get(tp)
            if nxt is None:
                del self.session_partitions[tp]
                forget.append(tp)
            elif nxt != prev:
                self.session_partitions[tp] = nxt
                altered[tp] = nxt
        # New partitions first, then the altered ones (Kafka moves those to the end of `next`).
        send = {tp: d for tp, d in wanted.items() if tp not in self.session_partitions}
        self.session_partitions.update(send)
        send.update(altered)
        return FetchRequestData(send, forget, dict(self.session_partitions), self.session_id, self.epoch)

    def handle_response(self, error: int, session_id: int, answered: set[TopicPartition]) -> bool:
        """Whether the answer's partitions may be used; moves the session on either way."""
        if error != E.NONE:
            if error == E.FETCH_SESSION_ID_NOT_FOUND:
                self._initial()
            else:
                self.epoch = INITIAL_EPOCH  # close the session we named, start again
            return False
        if self.epoch == INITIAL_EPOCH:
            if answered != set(self.session_partitions):  # extra or omitted partitions
                self._initial()
                return False
            if session_id == INVALID_SESSION_ID:
                self._initial()
            else:
                self.session_id, self.epoch = session_id, 1
            return True
        if not answered <= self.session_partitions.keys():
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            self._initial()  # the broker closed the session
        else:
            self.epoch = 1 if self.epoch == INT_MAX else self.epoch + 1
        return True

    def handle_error(self) -> None:
        """The request failed on the wire: the next one closes the session and starts again."""
        self.epoch = INITIAL_EPOCH

    def _initial(self) -> None:
        self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
