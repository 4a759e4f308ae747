"""Reading a GAE accelerator's configuration back from its HW_* registers."""

from sw.driver.common import hw_field_mismatches
from sw.driver.mmio import BusError

from .errors import GaeConfigMismatchError
from .spec import GaeCoreConfig, config_from_hw, gae_register_map, hw_info_values

__all__ = ["check_against", "read_hw_config"]

_HW_REGS = tuple(r.name for r in gae_register_map(GaeCoreConfig()).info_registers)


def _decode_hw(rm, words: dict):
    """The configuration the HW_* words describe in map ``rm``, or None."""
    try:
        cfg = config_from_hw(rm.decode_info(words))
    except (ValueError, TypeError, KeyError):
        return None
    return cfg if hw_info_values(cfg) == words else None


def read_hw_config(mmio) -> GaeCoreConfig:
    """The configuration the HW_* registers describe, read without touching unmapped addresses.

    The HW_* registers sit 16 bytes lower in a ``results="full"`` map (4 fewer arguments), and
    in an in-place map those lower addresses hold RTG_SCALE, RTG_OFFSET, STATUS and CYCLES --
    registers whose read has no side effect and which can never decode as HW_* values (STATUS
    bits 31:16 are 0, so "coef_width" would be 0). So the full-map addresses are read first,
    and the in-place addresses only if those do not decode. Rounding mode and tag widths are
    not in the registers: the defaults are returned (the driver does not depend on them);
    ``max_trajectories`` and ``capacity`` are one split of ``depth``.

    Raises
    ------
    GaeConfigMismatchError
        If neither decodes (not a GAE accelerator, or a different register map version), or
        if a HW_* address answers with a bus error (a smaller register map: another block).
    """
    seen = []
    for results in ("full", "inplace"):
        rm = gae_register_map(GaeCoreConfig(results=results))
        try:
            words = {name: mmio.read32(rm.offset(name)) for name in _HW_REGS}
        except BusError as e:
            raise GaeConfigMismatchError(f"the HW_* registers do not describe a GAE accelerator "
                                         f"({e}: another accelerator's control port?)") from e
        seen.append(f"{results}: " + ", ".join(f"{n}={w:#x}" for n, w in words.items()))
        cfg = _decode_hw(rm, words)
        if cfg is not None and cfg.results == results:
            return cfg
    raise GaeConfigMismatchError("the HW_* registers do not describe a GAE accelerator "
                                 "(read " + "; ".join(seen) + ")")


def check_against(config: GaeCoreConfig, hw: GaeCoreConfig):
    bad = hw_field_mismatches(gae_register_map(config), _HW_REGS, hw_info_values(config),
                              hw_info_values(hw))
    if bad:
        raise GaeConfigMismatchError("config does not match the hardware: " + "; ".join(bad))
