"""Client quota APIs — DescribeClientQuotas 0-1, AlterClientQuotas 0-1 — as a Kafka 3.9.1 broker
in ZooKeeper mode answers them (ZkAdminManager.describeClientQuotas / alterClientQuotas, checked
with `realkafka`). Quotas are stored and described here, not enforced.

Storage (zk.entity_config, byte for byte as AdminZkClient writes it):

  /config/users/<user>                       producer_byte_rate, consumer_byte_rate (LONG),
  /config/users/<user>/clients/<client-id>   request_percentage, controller_mutation_rate (DOUBLE)
  /config/clients/<client-id>
  /config/ips/<ip>                           connection_creation_rate (INT)
  /config/changes/config_change_<seq>        {"version":2,"entity_path":"users/<user>/clients/<c>"}

  <user>/<client-id> sanitized (Sanitizer), `<default>` for a null name. A LONG/INT value must be
  integral within 1e-6 ((value + 1e-6) truncated — so every negative value is refused, as in
  Kafka) and is kept as an integer string; a DOUBLE as Double.toString ("12.5", "1.0E7").
  An entity left with no quota is deleted (tryCleanQuotaNodes), the notification still written.

Answers: each AlterClientQuotas entry is applied in request order; entries naming the same
entity answer once (Kafka collects them in a map). The entity of an answer lists its types in
java.util.HashMap order (HashMap(n) of the request's n entity entries), the values of a
described entity in the Properties' hash order — both what a Java client sees.

Differences: an IP entity must be `<default>`, an IPv4 literal or `localhost` (Kafka asks DNS,
which the simulated world does not have); the entries of a DescribeClientQuotas answer come in
znode order (users, clients, users' clients, ips), not in the hash order of Kafka's Scala map.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kafkasim.broker.admin.manager import AdminError
from kafkasim.broker.zk.entity_config import CLIENTS, DEFAULT_ENTITY, IPS, USERS, EntityConfigStore
from kafkasim.broker.zk.java_compat import desanitize, java_double_str, java_hash_order, sanitize
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kafkasim.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message

if TYPE_CHECKING:
    from kafkasim.runtime.api import NodeRuntime

VERSIONS: dict[int, tuple[int, int]] = {A.DESCRIBE_CLIENT_QUOTAS: (0, 1), A.ALTER_CLIENT_QUOTAS: (0, 1)}

USER, CLIENT_ID, IP = "user", "client-id", "ip"          # ClientQuotaEntity types
LONG, DOUBLE, INT, STRING = "LONG", "DOUBLE", "INT", "STRING"
CLIENT_KEYS = {"producer_byte_rate": LONG, "consumer_byte_rate": LONG, "request_percentage": DOUBLE,
               "controller_mutation_rate": DOUBLE}                       # QuotaConfigs.userAndClientQuotaConfigs
USER_KEYS = {"SCRAM-SHA-256": STRING, "SCRAM-SHA-512": STRING, **CLIENT_KEYS}
IP_KEYS = {"connection_creation_rate": INT}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
EPSILON = 1e-6
_IPV4 = re.compile(r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$")

Entity = dict[str, "str | None"]                                     # entity type -> name (None: default)
Component = tuple[str, "str | None", bool]                           # (type, name, exact-or-default)


def _java_long_or_int(value: float, is_long: bool) -> int:
    """Scala's (value + epsilon).toLong / .toInt: truncation toward zero, clamped."""
    v = value + EPSILON
    if v != v:
        return 0
    lo, hi = (-(2**63), 2**63 - 1) if is_long else (-(2**31), 2**31 - 1)
    return max(lo, min(hi, int(v)))


def _valid_ip_entity(ip: str) -> bool:
    return ip == DEFAULT_ENTITY or ip == "localhost" or bool(_IPV4.match(ip))


class QuotaApis:
    def __init__(self, rt: NodeRuntime, store: EntityConfigStore) -> None:
        self.rt = rt
        self.store = store

    def handlers(self) -> dict[int, Any]:
        return {A.DESCRIBE_CLIENT_QUOTAS: self.describe_client_quotas,
                A.ALTER_CLIENT_QUOTAS: self.alter_client_quotas}

    # ---------------------------------------------------------------- AlterClientQuotas
    async def alter_client_quotas(self, header: RequestHeader, req: AlterClientQuotasRequest) -> Message:
        results: dict[tuple[tuple[str, str | None], ...], tuple[list[tuple[str, str | None]], int, str | None]] = {}
        for entry in req.entries:
            entity: Entity = {}
            for e in entry.entity:  # a HashMap: a repeated type keeps the last name
                entity[e.entity_type] = e.entity_name
            ordered = [(t, entity[t]) for t in java_hash_order(entity, len(entry.entity))]
            ops = [(o.key, None if o.remove else o.value) for o in entry.ops]
            try:
                await self._alter_entity(ordered, ops, req.validate_only)
                code, msg = E.NONE, None
            except AdminError as exc:
                code, msg = exc.error_code, exc.message
            key = tuple(sorted(ordered, key=lambda kv: (kv[0], kv[1] or "")))
            if key in results:
                del results[key]  # a Scala Map of the entities keeps the later answer
            results[key] = (ordered, code, msg)
        R = AlterClientQuotasResponse.EntryData
        entries = [R(error_code=code, error_message=msg,
                     entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in ordered])
                   for ordered, code, msg in results.values()]
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=entries)

    async def _alter_entity(self, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]],
                            validate_only: bool) -> None:
        user, client, ip = _parse_entity(entity)
        if user is not None and client is not None and ip is None:
            root, path, keys, user_client = USERS, f"{user}/{CLIENTS}/{client}", USER_KEYS, True
        elif user is not None and client is None and ip is None:
            root, path, keys, user_client = USERS, user, USER_KEYS, False
        elif user is None and client is not None and ip is None:
            root, path, keys, user_client = CLIENTS, client, CLIENT_KEYS, False
        elif user is None and client is None and ip is not None:
            if not _valid_ip_entity(ip):
                raise AdminError(E.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
            root, path, keys, user_client = IPS, ip, IP_KEYS, False
        elif ip is not None:
            raise AdminError(E.INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be used "
                             "with user/client ID entity.")
        else:
            raise AdminError(E.INVALID_REQUEST, "Invalid client quota entity")
        props = await self.store.fetch(root, path)
        for key, value in ops:
            _apply_op(props, keys, key, value)
        if validate_only:
            return
        await self.store.change(root, path, props, user_client)
        self.rt.trace("client_quota_changed", entity_path=f"{root}/{path}", config=dict(sorted(props.items())))

    # ---------------------------------------------------------------- DescribeClientQuotas
    async def describe_client_quotas(self, header: RequestHeader, req: DescribeClientQuotasRequest) -> Message:
        try:
            components = _filter_components(req.components)
            found = await self._describe(components, req.strict)
        except AdminError as exc:
            return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=exc.error_code,
                                                error_message=exc.message, entries=None)
        R = DescribeClientQuotasResponse.EntryData
        entries = [R(entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                     values=[R.ValueData(key=k, value=values[k]) for k in java_hash_order(values, scala=True)])
                   for entity, values in found]
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=E.NONE, error_message="", entries=entries)

    async def _describe(self, components: dict[str, Component], strict: bool
                        ) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
        user_c, client_c, ip_c = components.get(USER), components.get(CLIENT_ID), components.get(IP)
        if (user_c or client_c) and ip_c:
            raise AdminError(E.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component "
                             "should not be used with user or clientId filter component.")
        out = []
        if ip_c is None:
            out += await self._describe_user_client(user_c, client_c, strict)
        if user_c is None and client_c is None:
            out += await self._describe_ips(ip_c, strict)
        return out

    async def _describe_user_client(self, user_c: Component | None, client_c: Component | None, strict: bool
                                    ) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
        """handleDescribeClientQuotas: which znodes to read follows from exact / excluded."""
        exact_user, exact_client = bool(user_c and user_c[2]), bool(client_c and client_c[2])
        excl_user, excl_client = strict and user_c is None, strict and client_c is None
        s_user = _sanitized(user_c[1]) if user_c else ""
        s_client = _sanitized(client_c[1]) if client_c else ""
        user_name = user_c[1] if user_c else None
        client_name = client_c[1] if client_c else None
        rows: list[tuple[str | None, str | None, bool, bool, dict[str, str]]] = []
        if exact_user and excl_client:
            rows.append((user_name, None, True, False, await self.store.fetch(USERS, s_user)))
        elif not excl_user and not exact_client:
            rows += [(_desanitized(n), None, True, False, p) for n, p in (await self.store.fetch_all(USERS)).items()]
        if excl_user and exact_client:
            rows.append((None, client_name, False, True, await self.store.fetch(CLIENTS, s_client)))
        elif not exact_user and not excl_client:
            rows += [(None, _desanitized(n), False, True, p) for n, p in (await self.store.fetch_all(CLIENTS)).items()]
        if exact_user and exact_client:
            rows.append((user_name, client_name, True, True,
                         await self.store.fetch(USERS, f"{s_user}/{CLIENTS}/{s_client}")))
        elif not excl_user and not excl_client:
            for name, p in (await self.store.fetch_all_user_clients()).items():
                s_u, _, s_c = name.split("/")
                rows.append((_desanitized(s_u), _desanitized(s_c), True, True, p))
        out: list[tuple[list[tuple[str, str | None]], dict[str, float]]] = []
        for u, c, has_u, has_c, props in rows:
            quota = {k: float(v) for k, v in props.items() if k in CLIENT_KEYS}
            if quota and _matches(user_c, has_u, u, strict) and _matches(client_c, has_c, c, strict):
                entity: list[tuple[str, str | None]] = ([(USER, u)] if has_u else []) + \
                    ([(CLIENT_ID, c)] if has_c else [])
                out.append((entity, quota))
        return out

    async def _describe_ips(self, ip_c: Component | None, strict: bool
                            ) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
        entries: dict[str | None, dict[str, str]]
        if ip_c is not None and ip_c[2]:
            entries = {ip_c[1]: await self.store.fetch(IPS, _sanitized(ip_c[1]))}
        elif ip_c is not None or not strict:
            entries = {_desanitized(n): p for n, p in (await self.store.fetch_all(IPS)).items()}
        else:
            entries = {}
        out: list[tuple[list[tuple[str, str | None]], dict[str, float]]] = []
        for ip, props in entries.items():
            quota = {k: float(v) for k, v in props.items() if k in IP_KEYS}
            if quota:
                out.append(([(IP, ip)], quota))
        return out


def _parse_entity(entity: list[tuple[str, str | None]]) -> tuple[str | None, str | None, str | None]:
    """parseAndSanitizeQuotaEntity (in the HashMap's order, so the first bad entry answers)."""
    if not entity:
        raise AdminError(E.INVALID_REQUEST, "Invalid empty client quota entity")
    found: dict[str, str] = {}
    for etype, name in entity:
        if etype not in (USER, CLIENT_ID, IP):
            raise AdminError(E.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}")
        found[etype] = _sanitized(name)
        if name is not None and name == "":
            raise AdminError(E.INVALID_REQUEST, f"Empty {etype} not supported")
    return found.get(USER), found.get(CLIENT_ID), found.get(IP)


def _apply_op(props: dict[str, str], keys: dict[str, str], key: str, value: float | None) -> None:
    if value is None:
        props.pop(key, None)
        return
    ktype = keys.get(key)
    if ktype is None:
        raise AdminError(E.INVALID_REQUEST, f"Invalid configuration key {key}")
    if ktype == DOUBLE:
        props[key] = java_double_str(value)
    elif ktype in (LONG, INT):
        integral = _java_long_or_int(value, ktype == LONG)
        if abs(float(integral) - value) > EPSILON:
            raise AdminError(E.INVALID_REQUEST, f"Configuration {key} must be a {ktype} value")
        props[key] = str(integral)
    else:  # a SCRAM credential key: Kafka's IllegalStateException
        raise AdminError(E.UNKNOWN_SERVER_ERROR, None)  # ApiError of an IllegalStateException: no message


def _filter_components(data: list[Any]) -> dict[str, Component]:
    """DescribeClientQuotasRequest.filter (which fails first, on any component), then
    ZkAdminManager's checks of the components in order."""
    comps: list[Component] = []
    for c in data:
        if c.match_type == MATCH_EXACT:
            if c.match is None:  # ClientQuotaFilterComponent.ofEntity: a NullPointerException
                raise AdminError(E.UNKNOWN_SERVER_ERROR, None)
            comps.append((c.entity_type, c.match, True))
        elif c.match_type == MATCH_DEFAULT:
            comps.append((c.entity_type, None, True))
        elif c.match_type == MATCH_SPECIFIED:
            comps.append((c.entity_type, None, False))
        else:  # IllegalArgumentException("Unexpected match type")
            raise AdminError(E.UNKNOWN_SERVER_ERROR, None)
    out: dict[str, Component] = {}
    for comp in comps:
        etype = comp[0]
        if etype == "":
            raise AdminError(E.INVALID_REQUEST, "Unexpected empty filter component entity type")
        label = {USER: "user", CLIENT_ID: "client", IP: "ip"}.get(etype)
        if label is None:
            raise AdminError(E.UNSUPPORTED_VERSION, f"Custom entity type '{etype}' not supported")
        if etype in out:
            raise AdminError(E.INVALID_REQUEST, f"Duplicate {label} filter component entity type")
        out[etype] = comp
    return out


def _matches(component: Component | None, present: bool, name: str | None, strict: bool) -> bool:
    if component is None:
        return not present or not strict
    if component[2]:                      # exact name, or the default (None)
        return present and name == component[1]
    return present


def _sanitized(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _desanitized(name: str) -> str | None:
    return None if name == DEFAULT_ENTITY else desanitize(name)
