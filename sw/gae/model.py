"""Bit-exact golden model of the GAE accelerator (:class:`rtl_gen.gae.core.GaeCore`), on the host.

The run arguments (:class:`~sw.gae.spec.GaeCoreArgs`), the refusal rules
(:func:`~sw.gae.spec.check_args`) and the error codes are the spec's. The accelerator is: dequantize each stored code (:func:`sw.gae.quant.dequantize`), run the
processing elements (:func:`sw.gae.golden.gae_fixed`), and either requantize the results into
codes written in place (:func:`requantize`) or write them at full precision. Trajectories are
independent in every PE mode, so the model works on whole ``[T, M]`` arrays.
"""

import numpy as np

from sw.fixed import FixedFormat
from sw.gae.golden import gae_fixed
from sw.gae.quant import dequantize
from sw.gae.spec import GaeCoreArgs, GaeCoreConfig, check_args

__all__ = ["requantize", "gae_core"]

def requantize(x_raw, scale_raw, offset_raw, data_fmt: FixedFormat, reg_fmt: FixedFormat,
               code_bits: int):
    """Result codes written in place: ``code = round(x * scale + offset)``, saturated.

    ``x_raw`` are raw ``data_fmt`` integers, ``scale_raw`` and ``offset_raw`` raw ``reg_fmt``
    integers. Computed exactly as ``x_raw * scale_raw + (offset_raw << data_fmt.frac)``, then
    ``data_fmt.frac + reg_fmt.frac`` bits are dropped with ``data_fmt``'s rounding and the result
    saturates to the symmetric code range ``-(2^(b-1) - 1)..2^(b-1) - 1``.
    Returns ``(codes, overflow)``.
    """
    x = np.asarray(x_raw, np.int64)
    acc = x * np.int64(scale_raw) + (np.int64(offset_raw) << np.int64(data_fmt.frac))
    code = data_fmt.rshift_round(acc, data_fmt.frac + reg_fmt.frac)
    qmax = (1 << (code_bits - 1)) - 1
    over = (code > qmax) | (code < -qmax)
    return np.clip(code, -qmax, qmax), over


def gae_core(reward_codes, value_codes, bootstrap_codes, dones, args: GaeCoreArgs,
             config: GaeCoreConfig) -> dict:
    """What one run of the accelerator computes.

    Returns a dict with ``error`` (see :data:`ERRORS`); when 0 also ``adv`` and ``rtg`` (codes
    in ``"inplace"`` mode, raw data-format integers in ``"full"`` mode, ``[T, M]``) and the
    sticky flags ``dequant_overflow``, ``pe_overflow``, ``requant_overflow``.
    """
    error = check_args(args, config)
    if error:
        return {"error": error}
    reg, data = config.reg_format, config.pe.data_format
    r, o_r = dequantize(np.asarray(reward_codes), args.reward_scale, args.reward_offset, reg, data)
    v, o_v = dequantize(np.asarray(value_codes), args.value_scale, args.value_offset, reg, data)
    lv, o_l = dequantize(np.asarray(bootstrap_codes), args.value_scale, args.value_offset, reg,
                         data)
    adv, rtg, o_pe = gae_fixed(r, v, np.asarray(dones, bool), lv, args.gamma, args.gamma_lambda,
                               config.pe)
    out = {"error": 0, "dequant_overflow": bool(o_r.any() or o_v.any() or o_l.any()),
           "pe_overflow": bool(o_pe.any()), "requant_overflow": False}
    if config.results == "inplace":
        adv, o_a = requantize(adv, args.adv_scale, args.adv_offset, data, reg, config.code_bits)
        rtg, o_g = requantize(rtg, args.rtg_scale, args.rtg_offset, data, reg, config.code_bits)
        out["requant_overflow"] = bool(o_a.any() or o_g.any())
    out["adv"], out["rtg"] = adv, rtg
    return out
