"""Every option of every subcommand has help text, and `--help` shows each default."""

from __future__ import annotations

import argparse

import pytest

from kafkasim.cli import build_parser

pytestmark = pytest.mark.unit


def subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_subcommand_is_covered() -> None:
    assert set(subcommands()) == {"run", "sweep", "replay", "shrink", "serve", "cluster", "fault", "load", "report", "matrix",
                                   "scram-credential"}


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_has_help_and_shows_its_default(name: str) -> None:
    parser = subcommands()[name]
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name} {action.dest}: no help text"
        if action.default not in (None, argparse.SUPPRESS, []) and action.option_strings:
            assert f"(default: {action.default})" in text, f"{name} {action.dest}: default not shown"
        elif action.option_strings and not action.required and action.default is None:
            assert "default" in action.help, f"{name} {action.dest}: says nothing of what happens without it"
