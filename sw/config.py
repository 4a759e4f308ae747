"""What every block configuration shares: parameter checks and the dict round trip.

A block's configuration is a frozen dataclass deriving from :class:`Config`; its
``__post_init__`` validates each parameter with :func:`check_int` / :func:`check_choice`
(``ValueError`` naming the parameter and its range), and :meth:`Config.from_dict` /
:meth:`Config.to_dict` move it to and from the JSON of the CLI (``--config``) and the
manifests. Plain Python, no Amaranth.
"""

import math
import numbers
from dataclasses import asdict, fields, is_dataclass

__all__ = ["Config", "check_int", "check_choice", "check_real"]


def check_int(name: str, value, lo: int, hi: int):
    """``ValueError`` unless ``value`` is an ``int`` (not a bool) in ``lo..hi``."""
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


def check_real(name: str, value, *, positive: bool = True) -> float:
    """``value`` as a float; ``ValueError`` unless it is a finite real number (not a bool),
    ``> 0`` if ``positive``, else ``>= 0``: "lr must be a finite positive number, not nan"."""
    what = "a finite positive number" if positive else "a finite number >= 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or (value <= 0 if positive else value < 0):
        raise ValueError(f"{name} must be {what}, not {value!r}")
    return float(value)


def check_choice(name: str, value, choices):
    """``ValueError`` unless ``value`` is one of ``choices``."""
    if isinstance(value, bool) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, "
                         f"not {value!r}")


class Config:
    """Base of the block configurations (frozen dataclasses).

    Subclasses set :attr:`what`, the name of the parameters in messages (``"sum tree"`` gives
    "unknown sum tree parameter(s): ...").
    """

    what = "block"

    def to_dict(self) -> dict:
        """The parameters as plain JSON values (nested configurations as dicts, sequences as
        lists)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Config):
                v = v.to_dict()
            elif is_dataclass(v):
                v = asdict(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict):
        """The configuration of a parameter dict (missing ones take their defaults);
        ``ValueError`` naming unknown parameters."""
        if not isinstance(d, dict):
            raise TypeError(f"{cls.what} parameters must be a dict, not {d!r}")
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown {cls.what} parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)
