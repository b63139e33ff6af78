"""Random znode operations for the coordination store's persistence tests: a hypothesis
strategy, and two ways to run an op: straight on a ZkStore (building the WAL record the embedded
client would log) or through an EmbeddedZkClient (the real glue)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kafkasim.runtime import api
from kafkasim.runtime import zkstore_log as L
from kafkasim.runtime.api import ZOp
from kafkasim.runtime.zkstore import ZkStore

PATHS = ["/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f", "/brokers/ids/0", "/controller"]
ZK_ERRORS = (api.NoNodeError, api.NodeExistsError, api.BadVersionError, api.NotEmptyError,
             api.NoChildrenForEphemeralsError, api.SessionExpiredError)

_path = st.sampled_from(PATHS)
_data = st.binary(max_size=12)
_version = st.sampled_from([-1, -1, 0, 1, 2])
_create = st.tuples(st.just("create"), _path, _data, st.booleans(), st.booleans(), st.booleans(),
                    st.integers(0, 3))
_set = st.tuples(st.just("set"), _path, _data, _version)
_delete = st.tuples(st.just("delete"), _path, _version, st.booleans())
_zop = st.one_of(
    st.builds(lambda p, d, e, s: ZOp("create", p, d, -1, e, s), _path, _data, st.booleans(), st.booleans()),
    st.builds(lambda p, d, v: ZOp("set", p, d, v), _path, _data, _version),
    st.builds(lambda p, v: ZOp("delete", p, b"", v), _path, _version),
    st.builds(lambda p, v: ZOp("check", p, b"", v), _path, _version))
_multi = st.tuples(st.just("multi"), st.lists(_zop, min_size=1, max_size=3), st.integers(0, 3))
_session = st.one_of(st.tuples(st.just("open")), st.tuples(st.just("close"), st.integers(0, 3)))
OPS = st.lists(st.one_of(_create, _create, _set, _set, _delete, _multi, _session), max_size=30)


def state(store: ZkStore) -> bytes:
    """A canonical image of everything persisted: znodes with their stats, zxid, session counter."""
    return L.encode_snapshot(store, 0)


def expired(image: bytes) -> bytes:
    """The state `image` becomes when a restart expires every session in it."""
    store, _ = L.decode_snapshot(image)
    for sid in sorted(store.sessions):
        store.close_session(sid)
    return state(store)


def apply_to_store(store: ZkStore, sessions: list[int], op: tuple[Any, ...]) -> L.WalRecord | None:
    """Run `op` on the store; the record the embedded client logs for it (None if it failed)."""
    kind = op[0]
    if kind == "open":
        sessions.append(store.open_session())
        return L.WalRecord(L.OPEN_SESSION, sessions[-1])
    if not sessions:
        sessions.append(store.open_session())
        return L.WalRecord(L.OPEN_SESSION, sessions[-1])
    try:
        if kind == "close":
            sid = sessions.pop(op[1] % len(sessions))
            store.close_session(sid)
            return L.WalRecord(L.CLOSE_SESSION, sid)
        if kind == "create":
            _, path, data, eph, seq, mk, s = op
            sid = sessions[s % len(sessions)]
            created, _ = store.create(sid, path, data, eph, seq, mk)
            return L.create_record(sid, created, data, eph, mk)
        if kind == "set":
            store.set(op[1], op[2], op[3])
            return L.set_record(op[1], op[2], op[3])
        if kind == "delete":
            store.delete(op[1], op[2], op[3])
            return L.delete_record(op[1], op[2], op[3])
        sid = sessions[op[2] % len(sessions)]
        results, _ = store.multi(sid, op[1])
        return L.multi_record(sid, op[1], results)
    except ZK_ERRORS:
        return None


async def apply_to_client(clients: list[Any], connect: Any, op: tuple[Any, ...]) -> bool:
    """Run `op` through EmbeddedZkClients (`connect()` opens a session); True if it succeeded."""
    kind = op[0]
    if kind == "open" or not clients:
        clients.append(await connect())
        return True
    try:
        if kind == "close":
            await clients.pop(op[1] % len(clients)).close()
        elif kind == "create":
            _, path, data, eph, seq, mk, s = op
            await clients[s % len(clients)].create(path, data, ephemeral=eph, sequential=seq, makepath=mk)
        elif kind == "set":
            await clients[0].set(op[1], op[2], op[3])
        elif kind == "delete":
            await clients[0].delete(op[1], op[2], op[3])
        else:
            await clients[op[2] % len(clients)].multi(op[1])
        return True
    except ZK_ERRORS:
        return False
