"""Both sides: exceptions raised out of the Tau-Bench environment (tool errors never are: they become observations)."""

from __future__ import annotations


class TauError(Exception):
    """Base class of every error this package raises."""


class TauDataError(TauError):
    """The data directory is missing a file or holds something unexpected."""


class InvalidActionError(TauError, ValueError):
    """The action itself is malformed (not a tool-call problem): e.g. ``respond`` without content.

    Upstream lets a KeyError escape from step in the missing-content case; we raise this instead.
    """


class InvalidObservationError(TauError):
    """A tool returned something other than a string; the step cannot produce an observation.

    This is upstream's env-level ``pydantic.ValidationError`` (conformance fixtures record it as
    ``{"raises": "ValidationError"}``): airline ``send_certificate`` returns nothing when the user
    already holds all three certificate ids. The action is logged and the database is unchanged.
    """


class UserSimulatorError(TauError, ValueError):
    """The simulated user could not produce a reply (unparsable model output, no text, ...)."""


class EnvStateError(TauError, RuntimeError):
    """The environment was used out of order (e.g. step before reset)."""


class OutputsCheckError(TauError):
    """Upstream's outputs check calls ``.lower()`` on a respond content that is not text (None, a list):
    its ``calculate_reward`` raises, so the episode ends with reward 0. QitOS raises this at the same point."""
