"""The command line's flags around Hydra's: one line for a flag Hydra does not know, bare flags anywhere."""

from __future__ import annotations

BARE_FLAGS = ("-m", "--multirun", "--run", "--resolve", "--help", "--hydra-help", "--version")


VALUE_FLAGS = (
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--info",
    "-i",
    "--experimental-rerun",
    "--shell-completion",
    "-sc",
    "-h",
)


def unknown_flag_message(args: list[str]) -> str | None:
    """One line for a command-line flag Hydra does not know (its parser would print the whole usage)."""
    for arg in args:
        if arg.startswith("-") and arg not in BARE_FLAGS + VALUE_FLAGS and arg.split("=", 1)[0] not in VALUE_FLAGS:
            return (
                f"unknown flag {arg!r}; overrides are key=value (e.g. seed=1), flags are "
                + ", ".join(BARE_FLAGS)
                + " (--help lists them)"
            )
    return None


def flags_first(args: list[str]) -> list[str]:
    """Hydra's argument parser rejects ``seed=1 -m``; a bare flag anywhere means the same as in front."""
    return [a for a in args if a in BARE_FLAGS] + [a for a in args if a not in BARE_FLAGS]
