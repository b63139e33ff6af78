"""Named, seeded random streams.

One root seed is split into independent streams by a stable hash of the stream's name
(sha256, never Python's `hash`, which changes with PYTHONHASHSEED). A component asks for its
stream by name (`"net"`, `"disk/broker-0"`, `"workload/producer-1"`), so adding a stream, or
drawing more numbers from one, never shifts the numbers another component sees.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, TypeVar

from kafkasim.runtime.api import Rng

T = TypeVar("T")


def derive_seed(root_seed: int, name: str) -> int:
    digest = hashlib.sha256(f"{root_seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class SeededRng(Rng):
    __slots__ = ("_r", "name")

    def __init__(self, root_seed: int, name: str) -> None:
        self.name = name
        self._r = random.Random(derive_seed(root_seed, name))

    def random(self) -> float:
        return self._r.random()

    def randint(self, a: int, b: int) -> int:
        return self._r.randint(a, b)

    def choice(self, seq: list[T]) -> T:
        return seq[self._r.randrange(len(seq))]

    def randbytes(self, n: int) -> bytes:
        return self._r.getrandbits(8 * n).to_bytes(n, "big") if n else b""

    def expovariate(self, rate: float) -> float:
        return self._r.expovariate(rate)

    def shuffle(self, seq: list[Any]) -> None:
        self._r.shuffle(seq)

    def uniform(self, a: float, b: float) -> float:
        return self._r.uniform(a, b)
