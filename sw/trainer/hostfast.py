"""Compiled record packing of the trainer's driver: :func:`records` quantizes and packs a
batch of transitions in one pass (:func:`sw.trainer.hostkernels.pack_records`), giving the
bytes of :func:`sw.trainer.layout.pack_records` of the quantized values
(``tb/trainer/test_hostfast.py``). A value the format cannot hold makes it return None, and
the driver's numpy path then raises its error naming the argument. None without numba."""

import numpy as np

from sw.jit import MODES, built

from .layout import lane_bytes, record_bytes, record_fields

__all__ = ["available", "records", "FIELDS"]

#: The record fields the compiled kernel places, in the order of its ``fields`` rows.
FIELDS = ("obs", "next_obs", "reward", "action", "done")

_K = []


def _load():
    from . import hostkernels
    return {name: getattr(hostkernels, name) for name in hostkernels.KERNELS}


def _kernels():
    return built(_K, _load)


def available() -> bool:
    """Whether the compiled kernels can be used (numba installed)."""
    return _kernels() is not None


def records(config, obs, actions, rewards, next_obs, dones):
    """``n × record_bytes`` uint8 records of float transitions (checked shapes, actions in
    range, ``dones`` bool), or None: without numba, or when a value is outside the
    activation format (the caller's numpy path reports it)."""
    K = _kernels()
    if K is None:
        return None
    fmt = config.learner.numerics.act_format
    n = len(actions)
    lanes = np.zeros((n, record_bytes(config) // lane_bytes(config)),
                     f"<u{lane_bytes(config)}")
    lo, hi = float(fmt.min_raw), float(fmt.max_raw)
    bad = K["pack_records"](np.ascontiguousarray(obs), np.ascontiguousarray(actions),
                            np.ascontiguousarray(rewards), np.ascontiguousarray(next_obs),
                            np.ascontiguousarray(dones), float(2.0 ** fmt.frac),
                            MODES.index(fmt.rounding), lo, hi, _fields(config), lanes)
    if bad >= 0:
        return None
    return lanes.view(np.uint8).reshape(n, record_bytes(config))


def _fields(config) -> np.ndarray:
    """``(first lane, lsb, width)`` of the :data:`FIELDS` of a record, int64 rows."""
    by_name = {f.name: f for f in record_fields(config)}
    return np.array([(by_name[k].lane, by_name[k].lsb, by_name[k].width) for k in FIELDS],
                    np.int64)
