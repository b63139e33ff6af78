"""KIP-890 part 1 on the log side — Kafka 3.9's VerificationGuard and VerificationStateEntry.

Before a partition leader appends the first transactional batch of a producer's transaction
(no transaction of that producer ongoing in the partition), it asks the transaction coordinator
whether the partition is in the transaction (AddPartitionsToTxn verify_only). The ask starts by
creating a VerificationStateEntry for the producer id in the partition's producer state; its guard
is a unique object. The append then goes through only with that same guard: if a marker (or any
transactional batch) was written meanwhile, the entry was cleared and a later entry has a new
guard, so a stale "verified" answer cannot open a transaction the coordinator does not know of
(the ABA case UnifiedLog's comment describes). Once the first batch is in, the ongoing
transaction itself is the proof, and the entry is cleared.

The entry also keeps the lowest sequence seen while verifying (per epoch), so a higher sequence
that raced ahead of a failed lower one is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) rather than
written with a gap.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

_ids = itertools.count(1)


@dataclass(frozen=True)
class VerificationGuard:
    """Compared by value, as Kafka's (a number from a process-wide counter); 0 is the sentinel
    "no verification", which verifies nothing."""

    value: int = field(default_factory=lambda: next(_ids))

    def verify(self, verifying: VerificationGuard | None) -> bool:
        return verifying is not None and verifying != SENTINEL and verifying == self


SENTINEL = VerificationGuard(0)


class VerificationStateEntry:
    def __init__(self, timestamp_ms: float, sequence: int, epoch: int) -> None:
        self.timestamp_ms = timestamp_ms
        self.verification_guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch, or a newer epoch (its sequences start again)."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence
