"""LiveLoop: a simulated world's kernel paced to the wall clock, with real sockets in the same thread.

The simulated world runs unchanged; only who advances its clock differs. A simulated run jumps
from one queued entry to the next; the live loop never lets simulated time pass wall time
(milliseconds since the loop started): it runs every entry due by now, one instant at a time,
then sleeps in `select()` until the next entry's wall deadline or until real bytes arrive
(a real socket becomes readable, or another thread hands the loop a call). Before real bytes
enter the world, the simulated clock is brought up to the wall clock, so they arrive "now".

Pacing error: each instant the loop runs is `wall - sim` ms late (sim <= wall always); the loop
keeps a histogram of that lateness (PacingStats), the number `serve --sim` reports.

One thread owns the world: every call from elsewhere (the control plane's HTTP thread, a pytest
test) goes through `call()`, which runs it between instants on the loop's thread.
"""

from __future__ import annotations

import concurrent.futures
import math
import selectors
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kafkasim.runtime.sim.kernel import SimKernel

IoCallback = Callable[[int], None]  # called with the selector event mask
CALL_TIMEOUT_S = 60.0
_BUCKET_MS = 0.01          # pacing histogram resolution
_BUCKETS = 1_000_000       # 10 s of lateness at 0.01 ms; later than that lands in the last bucket


class PacingStats:
    """A histogram of lateness (wall minus simulated ms when an instant runs)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.max_ms = 0.0

    def add(self, late_ms: float) -> None:
        late_ms = max(0.0, late_ms)
        b = min(_BUCKETS, int(late_ms / _BUCKET_MS))
        self.counts[b] = self.counts.get(b, 0) + 1
        self.n += 1
        if late_ms > self.max_ms:
            self.max_ms = late_ms

    def quantile(self, q: float) -> float:
        if not self.n:
            return 0.0
        want, seen = math.ceil(q * self.n), 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= want:
                return round((b + 1) * _BUCKET_MS, 3)  # the bucket's upper edge: never flatters
        return round(self.max_ms, 3)

    def summary(self) -> dict[str, float]:
        return {"instants": self.n, "p50_ms": self.quantile(0.5), "p99_ms": self.quantile(0.99),
                "max_ms": round(self.max_ms, 3)}


class LiveLoop:
    def __init__(self, kernel: SimKernel) -> None:
        self.kernel = kernel
        self.selector = selectors.DefaultSelector()
        self.pacing = PacingStats()
        self._t0 = time.monotonic()
        self.wall_start_ms = time.time() * 1000.0  # the epoch ms at which simulated time 0 was
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, self._drain_wake)
        self._calls: deque[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = deque()
        self._lock = threading.Lock()
        self._stop = False
        self._thread_id: int | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ clocks
    def wall_ms(self) -> float:
        """Wall milliseconds since the loop started: the simulated clock's target."""
        return (time.monotonic() - self._t0) * 1000.0

    def epoch_ms(self) -> float:
        return time.time() * 1000.0

    # ------------------------------------------------------------ real sockets
    def register(self, sock: socket.socket, events: int, callback: IoCallback) -> None:
        self.selector.register(sock, events, callback)

    def modify(self, sock: socket.socket, events: int, callback: IoCallback) -> None:
        self.selector.modify(sock, events, callback)

    def unregister(self, sock: socket.socket) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    # ------------------------------------------------------------ cross-thread calls
    def in_loop(self) -> bool:
        return self._thread_id is None or self._thread_id == threading.get_ident()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the loop's thread between instants and return its result (or raise its
        exception). From the loop's own thread (or before it runs) it runs at once. This is the
        control server's Marshal for the live world."""
        if self.in_loop():
            return fn()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._calls.append((fn, done))
        self._wake()
        return done.result(timeout=CALL_TIMEOUT_S)

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> bool:
        """From another thread: poll `predicate` (run on the loop's thread) until it holds or
        `timeout_s` passes; answers whether it held."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.call(predicate):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: the loop is awake anyway

    def _drain_wake(self, _mask: int) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _run_calls(self) -> None:
        while True:
            with self._lock:
                if not self._calls:
                    return
                fn, done = self._calls.popleft()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(fn())
            except BaseException as exc:  # handed back to the caller's thread
                done.set_exception(exc)

    # ------------------------------------------------------------ pacing
    def catch_up(self) -> None:
        """Run every instant due by the wall clock now, then stand the simulated clock at now."""
        k = self.kernel
        now = self.wall_ms()
        while True:
            t = k.next_due_ms()
            if t is None or t >= now:
                break
            self.pacing.add(self.wall_ms() - t)
            # Exactly the entries at instant t (and what they schedule for t itself).
            k.run(until_ms=math.nextafter(t, math.inf))
        k.run(until_ms=now)

    def _timeout_s(self) -> float | None:
        t = self.kernel.next_due_ms()
        if t is None:
            return None
        return max(0.0, (t - self.wall_ms()) / 1000.0)

    def step(self) -> None:
        """One turn: run what is due, sleep until the next deadline or real I/O, handle it."""
        self.catch_up()
        events = self.selector.select(self._timeout_s())
        self.catch_up()  # real bytes enter at the simulated instant that is now
        for key, mask in events:
            key.data(mask)
        self._run_calls()

    def run_forever(self) -> None:
        self._thread_id = threading.get_ident()
        while not self._stop:
            self.step()

    def stop_on_signals(self) -> None:
        """SIGINT and SIGTERM end run_forever (on the main thread) after the current turn."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda _s, _f: self.stop())

    def start_thread(self) -> None:
        def run() -> None:
            self.run_forever()
        self._thread = threading.Thread(target=run, name="kafkasim-live", daemon=True)
        self._thread_id = -1  # calls from now on are marshalled (the thread sets its own id)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)

    def close(self) -> None:
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
