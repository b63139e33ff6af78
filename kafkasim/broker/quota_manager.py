"""Client quotas as Kafka's ClientQuotaManager enforces them (ZooKeeper mode): produce
(`producer_byte_rate`), fetch (`consumer_byte_rate`) and request (`request_percentage`) quotas per
user and client id, read from the config znodes AlterClientQuotas writes (zk.entity_config) and
refreshed from /config/changes.

Which quota applies (DefaultQuotaCallback, most specific first; each level is per entity, so a
`<default>` quota gives every user or client its own budget):
  /config/users/<user>/clients/<client-id>, /config/users/<user>/clients/<default>,
  /config/users/<user>, /config/users/<default>/clients/<client-id>,
  /config/users/<default>/clients/<default>, /config/users/<default>,
  /config/clients/<client-id>, /config/clients/<default>

The rate (Kafka's Rate over a SampledStat): `quota.window.num` samples of
`quota.window.size.seconds` each; a record goes to the current sample, a new sample starts when
the current one is a window old, samples older than num × size are reset before measuring, and
the rate is the samples' sum over the elapsed time since the oldest sample — at least
(num - 1) windows. A record that takes the rate above the quota is kept, and answered with a
throttle time (QuotaUtils.throttleTime):

    throttle_ms = round((rate - quota) / quota × window_ms)

which the response carries as throttle_time_ms while the broker mutes the client's channel for
that long. A throttled fetch answers no data (its bytes are unrecorded). Without any quota
configured for a kind, nothing is measured (ClientQuotaManager.quotasEnabled).

How the broker learns the quota configs (Kafka's ZkConfigManager, ZooKeeper mode): at startup
every entity under /config/users (and its /clients) and /config/clients — none when the znodes have
no children, as Kafka's getAllEntitiesWithConfig — then each /config/changes notification the
listener sees (a watch), re-reading the entity it names. Kafka always does this; so does kafkasim
(`client.quotas=false` turns it off). The reads that find nothing in a cluster with no quota
(the children of /config/users, /config/clients and /config/changes) are pipelined behind the
broker's next ZooKeeper request — its registration at startup, its re-registration after a new
session — as Kafka's ZooKeeperClient pipelines its asynchronous requests on one connection; the
simulated world charges them no round trip of their own, so a run that sets no quota keeps its
schedule (trace hash) whether or not the broker enforces quotas.

Request quotas (what a request's time is, which requests are exempt, the throttle's bound of one
window) are quota_manager_request.py's. A request over both a bandwidth and the request quota is
answered with the larger throttle time, as KafkaApis does for Produce and Fetch.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any

from kafkasim.broker import quota_manager_request as RQ
from kafkasim.broker.request_context import context_of
from kafkasim.broker.zk import entity_config as EC
from kafkasim.broker.zk.acl_store import ChangeNotificationListener
from kafkasim.broker.zk.java_compat import sanitize
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.protocol import api as A
from kafkasim.protocol.messages.fetch import FetchResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import ConnectionLossError, NodeRuntime, NoNodeError, SessionExpiredError

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# AbstractResponse.shouldClientThrottle (KIP-219): from these versions the client holds back
# itself, so the broker answers at once and mutes the channel; before, it holds the answer back.
CLIENT_THROTTLES_FROM = {A.PRODUCE: 6, A.FETCH: 8}
DEFAULT = EC.DEFAULT_ENTITY


@dataclass
class _Sample:
    last_window_ms: float
    value: float = 0.0

    def reset(self, now: float) -> None:
        self.last_window_ms, self.value = now, 0.0


@dataclass
class Rate:
    """org.apache.kafka.common.metrics.stats.Rate (per second) over a SampledStat."""

    samples_num: int
    window_ms: float
    samples: list[_Sample] = field(default_factory=list)
    current: int = 0

    def record(self, value: float, now: float) -> None:
        if not self.samples:
            self.samples.append(_Sample(now))
        sample = self.samples[self.current]
        if now - sample.last_window_ms >= self.window_ms:   # Sample.isComplete: advance
            self.current = (self.current + 1) % self.samples_num
            if self.current >= len(self.samples):
                self.samples.append(_Sample(now))
            else:
                self.samples[self.current].reset(now)
            sample = self.samples[self.current]
        sample.value += value

    def window_size_ms(self, now: float) -> float:
        self._purge(now)
        if not self.samples:
            self.samples.append(_Sample(now))
        elapsed = now - min(s.last_window_ms for s in self.samples)
        full = int(elapsed // self.window_ms)
        if full < self.samples_num - 1:
            elapsed += (self.samples_num - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now: float) -> float:
        """Per second."""
        window = self.window_size_ms(now)
        return sum(s.value for s in self.samples) / (window / 1000.0)

    def _purge(self, now: float) -> None:
        expire = self.samples_num * self.window_ms
        for s in self.samples:
            if now - s.last_window_ms >= expire:
                s.reset(now)


class QuotaConfigs:
    """The quota znodes' values: entity path ('users/alice', 'users/alice/clients/c1',
    'clients/c1', sanitized names) -> {quota key: value}."""

    def __init__(self) -> None:
        self.entities: dict[str, dict[str, float]] = {}

    def set(self, entity_path: str, config: dict[str, str]) -> None:
        values = {}
        for key in (PRODUCE, FETCH, REQUEST):
            if key in config:
                try:
                    values[key] = float(config[key])
                except ValueError:
                    continue
        if values:
            self.entities[entity_path] = values
        else:
            self.entities.pop(entity_path, None)

    def enabled(self, key: str) -> bool:
        return any(key in v for v in self.entities.values())

    def resolve(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """((user tag, client tag), quota) of the most specific entity with `key`."""
        u, c = sanitize(user), sanitize(client_id)
        levels = ((f"users/{u}/clients/{c}", (u, c)), (f"users/{u}/clients/{DEFAULT}", (u, c)),
                  (f"users/{u}", (u, "")), (f"users/{DEFAULT}/clients/{c}", (u, c)),
                  (f"users/{DEFAULT}/clients/{DEFAULT}", (u, c)), (f"users/{DEFAULT}", (u, "")),
                  (f"clients/{c}", ("", c)), (f"clients/{DEFAULT}", ("", c)))
        for path, tags in levels:
            value = self.entities.get(path, {}).get(key)
            if value is not None:
                return tags, value
        return None


class ClientQuotaManager:
    """One kind of quota (produce, fetch or request): a Rate per (user, client id) entity."""

    def __init__(self, key: str, configs: QuotaConfigs, samples: int, window_ms: float,
                 max_throttle_ms: float | None = None) -> None:
        """`max_throttle_ms`: the request quota's bound (QuotaUtils.boundedThrottleTime)."""
        self.key, self.configs, self.samples, self.window_ms = key, configs, samples, window_ms
        self.max_throttle_ms = max_throttle_ms
        self.sensors: dict[tuple[str, str], Rate] = {}

    def enabled(self) -> bool:
        return self.configs.enabled(self.key)

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now: float) -> int:
        resolved = self.configs.resolve(self.key, user, client_id)
        if resolved is None:
            return 0
        tags, quota = resolved
        rate = self.sensors.setdefault(tags, Rate(self.samples, self.window_ms))
        rate.record(value, now)
        measured = rate.measure(now)
        if quota <= 0 or measured <= quota:
            # A zero quota: Kafka's (rate - 0) / 0 is infinite, Math.round gives Long.MAX_VALUE,
            # and .toInt makes it -1 — no throttle; so here.
            return 0
        throttle = round((measured - quota) / quota * rate.window_size_ms(now))
        return throttle if self.max_throttle_ms is None else int(min(throttle, self.max_throttle_ms))

    def unrecord(self, user: str, client_id: str, value: float, now: float) -> None:
        resolved = self.configs.resolve(self.key, user, client_id)
        if resolved is not None and resolved[0] in self.sensors:
            self.sensors[resolved[0]].record(-value, now)


class PipelinedChangeListener(ChangeNotificationListener):
    """The /config/changes listener whose reads after startup and after a new ZooKeeper session
    are pipelined (ZooKeeperClient.get_children_pipelined) rather than requests of their own;
    reads a notification's watch triggers are ordinary ones."""

    def first_read(self) -> Awaitable[list[str]]:
        """The children of /config/changes, with the listener's watch, pipelined (queued now)."""
        return self.zk.get_children_pipelined(self.path, self._watch)

    async def process_read(self, reading: Awaitable[list[str]]) -> None:
        try:
            children: list[str] | None = await reading
        except NoNodeError:
            children = []
        except (ConnectionLossError, SessionExpiredError):
            children = None   # process() reads them itself
        await self.process(children)

    async def after_new_session(self) -> None:
        # Not awaited: the read waits for the new session's next request (the broker's
        # re-registration, which a later session handler may be the one to send).
        self.rt.spawn(self.process_read(self.first_read()), name=f"change notifications {self.path}")


class QuotaManagers:
    """The broker's three client quota managers and the znodes they read."""

    def __init__(self, rt: NodeRuntime, zk: ZooKeeperClient, samples: int, window_seconds: int) -> None:
        self.rt, self.zk = rt, zk
        self.configs = QuotaConfigs()
        window_ms = window_seconds * 1000.0
        self.produce = ClientQuotaManager(PRODUCE, self.configs, samples, window_ms)
        self.fetch = ClientQuotaManager(FETCH, self.configs, samples, window_ms)
        self.request = ClientQuotaManager(REQUEST, self.configs, samples, window_ms, max_throttle_ms=window_ms)
        self.store = EC.EntityConfigStore(zk)
        self.listener = PipelinedChangeListener(rt, zk, EC.CONFIG_CHANGES, EC.CONFIG_CHANGE_PREFIX,
                                                self._on_change)
        self._muted: dict[int, int] = {}   # id(request header) -> throttle ms, until the answer is sent

    def start(self) -> Awaitable[None]:
        """ZkConfigManager.startup's quota half: every user, <user, client-id> and client-id
        config, and the /config/changes listener. The first reads (the children of /config/users,
        /config/clients, /config/changes) are queued now, pipelined behind the broker's next
        ZooKeeper request (see the module's docstring); the awaitable returned finishes the
        load — the broker awaits it before it processes requests."""
        users = self.zk.get_children_pipelined(f"{EC.CONFIG_ROOT}/{EC.USERS}")
        clients = self.zk.get_children_pipelined(f"{EC.CONFIG_ROOT}/{EC.CLIENTS}")
        changes = self.listener.first_read()
        return _WhenAwaited(lambda: self._load(users, clients, changes))

    async def _load(self, users: Awaitable[list[str]], clients: Awaitable[list[str]],
                    changes: Awaitable[list[str]]) -> None:
        for user in await self._children(users, EC.USERS):
            self.configs.set(f"{EC.USERS}/{user}", await self.store.fetch(EC.USERS, user))
            # fetchAllChildEntityConfigs(users, clients): an entity per client of each user.
            for client in await self.store.children(f"{EC.CONFIG_ROOT}/{EC.USERS}/{user}/{EC.CLIENTS}"):
                name = f"{user}/{EC.CLIENTS}/{client}"
                self.configs.set(f"{EC.USERS}/{name}", await self.store.fetch(EC.USERS, name))
        for client in await self._children(clients, EC.CLIENTS):
            self.configs.set(f"{EC.CLIENTS}/{client}", await self.store.fetch(EC.CLIENTS, client))
        await self.listener.process_read(changes)

    async def _children(self, reading: Awaitable[list[str]], entity_type: str) -> list[str]:
        """A pipelined read's answer; read again if its session met trouble (as Kafka's
        retryRequestsUntilConnected would)."""
        try:
            return sorted(await reading)
        except NoNodeError:   # never created (fetchAllEntityConfigs: no entities)
            return []
        except (ConnectionLossError, SessionExpiredError):
            pass  # (no await in an except block: kafka_zk_client._get_or_none says why)
        return await self.store.children(f"{EC.CONFIG_ROOT}/{entity_type}")

    async def _on_change(self, data: bytes) -> None:
        try:
            doc = json.loads(data)
            path = str(doc["entity_path"]) if doc.get("version") == 2 else \
                f"{doc['entity_type']}/{doc['entity_name']}"
        except (ValueError, KeyError, TypeError):
            return
        entity_type, _, name = path.partition("/")
        if entity_type in (EC.USERS, EC.CLIENTS) and name:
            config = await self.store.fetch(entity_type, name)
            self.configs.set(path, config)
            self.rt.trace("quota_config_changed", entity=path, config=dict(sorted(config.items())))

    # ---------------------------------------------------------------- enforcement
    async def throttle(self, header: RequestHeader, request: Any, response: Message | None,
                       request_ms: float) -> Message | None:
        """Record the request against the sender's quotas, as KafkaApis does as it answers: a
        Produce's request bytes or a consumer Fetch's response bytes (bandwidth), and
        `request_ms` (quota_manager_request). Over a quota, the answer carries the larger throttle
        time (a fetch's answer is emptied) and the channel is muted for it (channel_throttle_ms)
        — or, for a bandwidth throttle of a client from before KIP-219, the answer is held back."""
        key, version = header.request_api_key, header.request_api_version
        user, client_id = context_of(header).principal.name, header.client_id or ""
        now = self.rt.monotonic_ms()
        request_throttle = 0
        if self.request.enabled() and not RQ.exempt(key, version, request):
            request_throttle = self.request.record_and_get_throttle_ms(user, client_id, RQ.percentage(request_ms),
                                                                       now)
        bandwidth = self._bandwidth(key, version, request, response)
        bandwidth_throttle = 0
        if bandwidth is not None:
            bandwidth_throttle = bandwidth[0].record_and_get_throttle_ms(user, client_id, bandwidth[1], now)
        throttle_ms = max(request_throttle, bandwidth_throttle)
        if throttle_ms <= 0:
            return response
        if key == A.FETCH and bandwidth is not None:
            bandwidth[0].unrecord(user, client_id, bandwidth[1], now)   # nothing of it is sent
            response = FetchResponse(throttle_time_ms=throttle_ms, error_code=0, session_id=0, responses=[])
        elif response is not None and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = throttle_ms
        kind = REQUEST if request_throttle >= bandwidth_throttle else PRODUCE if key == A.PRODUCE else FETCH
        self.rt.trace("client_throttled", api_key=key, user=user, client_id=client_id, throttle_ms=throttle_ms,
                      quota=kind)
        if kind != REQUEST and version < CLIENT_THROTTLES_FROM[key]:
            await self.rt.sleep(throttle_ms)
        else:
            self._muted[id(header)] = throttle_ms
        return response

    def _bandwidth(self, key: int, version: int, request: Any,
                   response: Message | None) -> tuple[ClientQuotaManager, int] | None:
        """The bandwidth quota manager that records this request, and the bytes it records."""
        if key == A.PRODUCE and self.produce.enabled():
            return self.produce, _encoded_size(request, version)
        if key == A.FETCH and self.fetch.enabled() and response is not None and RQ.consumer_fetch(request, version):
            return self.fetch, _encoded_size(response, version)
        return None

    def channel_throttle_ms(self, header: RequestHeader) -> int:
        """How long the socket server keeps the channel muted after answering this request."""
        return self._muted.pop(id(header), 0)


def _encoded_size(message: Any, version: int) -> int:
    """The message's size on the wire (records counted by length, never copied)."""
    total = 0

    def add(part: Any) -> None:
        nonlocal total
        total += len(part)
    message.write(add, version)
    return total


class _WhenAwaited:
    """A coroutine made only when awaited: a broker that dies between queueing the quota reads
    and awaiting their load (a crash during registration) leaves no never-awaited coroutine
    behind (Python warns of one when it is collected)."""

    def __init__(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._make = make

    def __await__(self) -> Generator[Any, None, None]:
        return self._make().__await__()
