"""Bit-exact golden model of the GAE accelerator (:class:`rtl_gen.gae.core.GaeCore`), on the host.

The run arguments (:class:`~sw.gae.spec.GaeCoreArgs`), the refusal rules
(:func:`~sw.gae.spec.check_args`) and the error codes are the spec's. The accelerator is: dequantize each stored code (:func:`sw.gae.quant.dequantize`), run the
processing elements (:func:`sw.gae.golden.gae_fixed`), and either requantize the results into
codes written in place (:func:`requantize`) or write them at full precision. Trajectories are
independent in every PE mode, so the model works on whole ``[T, M]`` arrays.
"""

import numpy as np

from sw.gae.golden import gae_fixed
from sw.gae.quant import dequantize
from sw.gae.spec import GaeCoreArgs, GaeCoreConfig, check_args

__all__ = ["requantize", "gae_core"]

def requantize(x_raw, scale_raw, offset_raw, config: GaeCoreConfig):
    """Result codes written in place: ``code = round(x * scale + offset)``, saturated.

    ``x_raw`` are raw ``config.pe.data_format`` integers, ``scale_raw`` a
    :attr:`~sw.gae.spec.GaeCoreConfig.result_scale_format` word (mantissa ``m``, shift ``e``),
    ``offset_raw`` a raw ``config.reg_format`` integer. With ``F = REQUANT_FRAC``::

        a = saturate_27((x << REQUANT_LSHIFT) >> e)      # floor; the DSP's 27-bit operand
        code = (a * m + (offset << (F - reg_frac)) + 2**(F-1)) >> F     # rounded half up

    then saturated to the symmetric code range ``-(2^(b-1) - 1)..2^(b-1) - 1``.
    Returns ``(codes, overflow)``.
    """
    cfg = config
    m, e = cfg.result_scale_format.unpack(scale_raw)
    x = np.asarray(x_raw, np.int64)
    lim = 1 << (cfg.REQUANT_OPERAND_BITS - 1)
    a = np.clip((x << np.int64(cfg.REQUANT_LSHIFT)) >> np.int64(e), -lim, lim - 1)
    F = cfg.REQUANT_FRAC
    off = (int(offset_raw) << (F - cfg.reg_frac)) + (1 << (F - 1))
    code = (a * np.int64(m) + np.int64(off)) >> np.int64(F)
    qmax = cfg.code_max
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
    reg, data, sf = config.reg_format, config.pe.data_format, config.scale_format
    r, o_r = dequantize(np.asarray(reward_codes), args.reward_scale, args.reward_offset, sf, reg,
                        data)
    v, o_v = dequantize(np.asarray(value_codes), args.value_scale, args.value_offset, sf, reg,
                        data)
    lv, o_l = dequantize(np.asarray(bootstrap_codes), args.value_scale, args.value_offset, sf,
                         reg, data)
    adv, rtg, o_pe = gae_fixed(r, v, np.asarray(dones, bool), lv, args.gamma, args.gamma_lambda,
                               config.pe)
    out = {"error": 0, "dequant_overflow": bool(o_r.any() or o_v.any() or o_l.any()),
           "pe_overflow": bool(o_pe.any()), "requant_overflow": False}
    if config.results == "inplace":
        adv, o_a = requantize(adv, args.adv_scale, args.adv_offset, config)
        rtg, o_g = requantize(rtg, args.rtg_scale, args.rtg_offset, config)
        out["requant_overflow"] = bool(o_a.any() or o_g.any())
    out["adv"], out["rtg"] = adv, rtg
    return out
