"""The errors a user can cause, each a ``ValueError`` so the CLI turns it into one ``error:`` line.

- :class:`ConfigError`: a config value is wrong; the message starts with the dotted key (``metrics.threshold``).
- :class:`SourceFormatError`: a file of results is missing or malformed (file, row, column).
- :class:`MetricInputError`: an array given to a metric has the wrong shape, type or values.
- ``owl_eval.protocols.base.AgentOutputError``: an agent returned something the protocol cannot accept.
- :class:`UnsafePathError`: a name or path taken from user data would leave its folder or follow a link.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value is missing, of the wrong type or out of range; the message names the key."""


class SourceFormatError(ValueError):
    """A file of a source is missing or malformed; the message names the file, row and column."""


class MetricInputError(ValueError):
    """Bad input to a metric: names the argument, what was expected and what was given."""


class UnsafePathError(ValueError):
    """A name from user data is not a safe file name, or a user folder holds a symbolic link."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Slurm sends on preemption or time-out, and ``docker stop`` and Kubernetes send): handled
    as Ctrl-C is (what was completed is logged, the run ends KILLED), but the command exits 143, not 130."""

    def __str__(self) -> str:
        return "terminated (SIGTERM)"


class LaunchAborted(BaseException):
    """Stops a launch from inside a Hydra callback, carrying the user's error (a ``ValueError``). Hydra turns
    an ``Exception`` raised in a callback into a warning and goes on; this one reaches the CLI, which
    prints the carried error as its one ``error:`` line."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error
