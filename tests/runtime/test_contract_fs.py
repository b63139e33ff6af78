"""Contract: the POSIX subset Kafka's log uses — identical in both worlds."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_worlds import Ctx, World

pytestmark = pytest.mark.contract


def test_file_append_pwrite_read_truncate_size(world: World) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        fs = ctx.rt.fs
        f = fs.open("a.log")
        out: list[Any] = [f.size(), f.append(b"hello"), f.append(b" world"), f.size()]
        f.pwrite(0, b"J")
        out += [f.read(0, 100), f.read(6, 3), f.read(11, 5)]  # short read at the end
        f.pwrite(14, b"!")  # past the end: the gap reads as zeros
        out += [f.size(), f.read(11, 4)]
        f.truncate(5)
        out += [f.size(), f.read(0, 100), f.append(b"X")]  # append goes to the new end
        f.truncate(8)  # growing truncate zero-fills
        out += [f.read(0, 100)]
        await f.fsync()
        f.close()
        g = fs.open("a.log", create=False)  # contents outlive the handle
        out += [g.read(0, 100), g.size()]
        g.close()
        return out

    assert world.run(main) == [0, 0, 5, 11, b"Jello world", b"wor", b"", 15, b"\0\0\0!",
                               5, b"Jello", 5, b"JelloX\0\0", b"JelloX\0\0", 8]


def test_rename_replaces_unlink_and_missing_files(world: World) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        fs, out = ctx.rt.fs, []
        for name, body in (("new", b"new"), ("old", b"old")):
            f = fs.open(name)
            f.append(body)
            await f.fsync()
            f.close()
        fs.rename("new", "old")  # atomic replace, as a checkpoint write does
        out += [fs.exists("new"), fs.open("old", create=False).read(0, 10)]
        fs.unlink("old")
        out.append(fs.exists("old"))
        for bad in (lambda: fs.open("old", create=False), lambda: fs.unlink("old"),
                    lambda: fs.open("nodir/x"), lambda: fs.listdir("nodir"),
                    lambda: fs.rename("missing", "x")):
            with pytest.raises(FileNotFoundError):
                bad()
        await fs.fsync_dir("")
        return out

    assert world.run(main) == [False, b"new", False]


def test_rename_moves_a_directory_with_its_files(world: World) -> None:
    """A log dir renamed to its `-delete` name (LogManager.async_delete) takes its files along."""
    async def main(ctx: Ctx) -> list[Any]:
        fs = ctx.rt.fs
        fs.mkdir("d/t-0")
        f = fs.open("d/t-0/a.log")
        f.append(b"abc")
        f.close()
        fs.rename("d/t-0", "d/t-0.x-delete")
        await fs.fsync_dir("d")
        out: list[Any] = [fs.listdir("d"), fs.listdir("d/t-0.x-delete"), fs.exists("d/t-0/a.log")]
        out.append(fs.open("d/t-0.x-delete/a.log", create=False).read(0, 3))
        return out

    assert world.run(main) == [["t-0.x-delete"], ["a.log"], False, b"abc"]


def test_mkdir_parents_listdir_sorted_rmdir(world: World) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        fs = ctx.rt.fs
        fs.mkdir("logs/topic-0")
        fs.mkdir("logs/topic-0")  # no error when it exists
        for name in ("00000000000000000100.log", "00000000000000000000.log", "b.index", "a"):
            fs.open(f"logs/topic-0/{name}").close()
        fs.mkdir("logs/z-dir")
        await fs.fsync_dir("logs/topic-0")
        await fs.fsync_dir("logs")
        out: list[Any] = [fs.listdir("logs/topic-0"), fs.listdir("logs"), fs.exists("logs/z-dir")]
        fs.rmdir("logs/z-dir")
        with pytest.raises(OSError):
            fs.rmdir("logs/topic-0")  # not empty
        out += [fs.listdir("logs")]
        return out

    assert world.run(main) == [
        ["00000000000000000000.log", "00000000000000000100.log", "a", "b.index"],
        ["topic-0", "z-dir"], True, ["topic-0"]]


def test_nodes_have_separate_disks(world: World) -> None:
    async def main(ctx: Ctx) -> list[bool]:
        ctx.node("a").fs.open("only-on-a").close()
        return [ctx.node("a").fs.exists("only-on-a"), ctx.node("b").fs.exists("only-on-a")]

    assert world.run(main) == [True, False]
