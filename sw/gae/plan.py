"""The GAE host's quantization plan: inputs -> codes and scales -> results, numba or numpy.

A :class:`~sw.gae.driver.GaeDriver` builds one plan at construction (:func:`make_plan`, the
backend chosen once by :func:`sw.gae.hostfast.choose_backend`) and stays a bus driver: it
loads, starts, waits and reads, and calls its plan for every host computation. A plan does,
for one batch:

* :meth:`~QuantizationPlan.quantize` -- the caller's float inputs to codes and dequantizer
  registers (:func:`sw.gae.batch.prepare_caller_units`);
* :meth:`~QuantizationPlan.result_scale` -- the in-place result ranges and requantizer
  registers from the statistics of the dequantized inputs (:meth:`~QuantizationPlan.
  result_stats`, then :meth:`~QuantizationPlan.set_result_ranges`, which a
  :class:`~sw.gae.stream.GaeStream` calls with the statistics its pushes kept);
* :meth:`~QuantizationPlan.images` -- the codes to the memory images the driver writes;
* :meth:`~QuantizationPlan.decode` -- the result images the driver read to float results
  (:meth:`~QuantizationPlan.dequantize` of unpacked codes).

:class:`NumpyPlan` is the numpy reference (the functions of :mod:`sw.gae.batch`,
:mod:`sw.gae.results` and :mod:`sw.gae.layout`). :class:`NumbaPlan` computes the same bit for
bit in the compiled kernels of :mod:`sw.gae.hostfast` (``tb/gae/test_host_fast.py`` compares
the two); an input its kernels decline (non-finite values, shapes that disagree, non-bool
dones, full results, a short image) goes to the :class:`NumpyPlan` it holds, which computes it
or raises its error.
"""

from . import hostfast
from .batch import HostSettings, code_images, prepare_caller_units
from .layout import unpack_rows
from .results import dequantize_results, result_stats, set_result_ranges

__all__ = ["NumbaPlan", "NumpyPlan", "QuantizationPlan", "make_plan"]


class QuantizationPlan:
    """One driver's host computations (module docstring): ``cfg`` the accelerator's
    :class:`~sw.gae.spec.GaeCoreConfig`, ``settings`` the driver's
    :class:`~sw.gae.batch.HostSettings`. Subclasses: :class:`NumpyPlan`, :class:`NumbaPlan`.

    Members: ``cfg``, ``settings``, ``backend`` (``"numpy"`` or ``"numba"``)."""

    backend = None

    def __init__(self, cfg, settings: HostSettings):
        self.cfg = cfg
        self.settings = settings

    def __repr__(self):
        return f"{type(self).__name__}({self.cfg!r}, {self.settings!r})"

    # -- inputs -> codes and scales ------------------------------------------------------------
    def quantize(self, r, v, last, d, gamma, lam, coefs, *, rounding="error_feedback") -> dict:
        """Codes and dequantizer registers of rewards ``r``, values ``v`` ([T, M]), bootstrap
        values ``last`` ([M]) and bool dones ``d`` in the caller's units: the dict of
        :func:`sw.gae.batch.prepare_caller_units`. ``coefs``: ``(gamma, gamma * lam)`` as the
        accelerator holds them; ``rounding``: the pipeline's ``reward_rounding``."""
        raise NotImplementedError

    def result_stats(self, batch) -> dict:
        """The keyword arguments of :meth:`set_result_ranges` from ``batch``'s codes:
        :func:`sw.gae.results.result_stats`."""
        raise NotImplementedError

    def set_result_ranges(self, batch, result_range=None, **stats):
        """``batch``'s in-place result ranges, bounds and requantizer registers from
        ``stats`` (:func:`sw.gae.results.set_result_ranges`) with the driver's
        ``result_sigmas``; ``result_range`` (caller's units), else the driver's, overrides
        the automatic ranges."""
        s = self.settings
        set_result_ranges(batch, self.cfg, s.result_sigmas, result_range or s.result_range,
                          **stats)

    def result_scale(self, batch, result_range=None):
        """:meth:`result_stats`, then :meth:`set_result_ranges` (:mod:`sw.gae.results`,
        "Result scale")."""
        self.set_result_ranges(batch, result_range, **self.result_stats(batch))

    def images(self, reward_codes, value_codes, bootstrap_codes, dones, check_shape):
        """``[(region, image)]``: what :meth:`GaeDriver.load <sw.gae.driver.GaeDriver.load>`
        writes, checked first (:func:`sw.gae.batch.code_images`)."""
        raise NotImplementedError

    # -- codes -> results ----------------------------------------------------------------------
    def dequantize(self, batch, adv_raw, rtg_raw):
        """Result codes (in place) or data-format words (full) as float64 ``(adv, returns)``
        (:func:`sw.gae.results.dequantize_results`)."""
        raise NotImplementedError

    def decode(self, batch, images, outs=None, values=None):
        """``(adv, returns)`` of the result images ``[(region, data, T, M)]`` the driver read,
        into ``outs`` (a pair of float ``[T, M]`` arrays) if given. ``values`` (the caller's
        units): ``images`` holds the advantages (first) and the returns are the advantages
        plus ``values``."""
        raise NotImplementedError


class NumpyPlan(QuantizationPlan):
    """The numpy reference: the functions of :mod:`sw.gae.batch`, :mod:`sw.gae.results` and
    :mod:`sw.gae.layout`."""

    backend = "numpy"

    def quantize(self, r, v, last, d, gamma, lam, coefs, *, rounding="error_feedback"):
        cfg = self.cfg
        return prepare_caller_units(r, v, last, d, gamma, lam, bits=cfg.code_bits,
                                    reg_format=cfg.reg_format, data_format=cfg.pe.data_format,
                                    reward_rounding=rounding, coefs=coefs)

    def result_stats(self, batch):
        return result_stats(batch, self.cfg)

    def images(self, reward_codes, value_codes, bootstrap_codes, dones, check_shape):
        return code_images(self.cfg, reward_codes, value_codes, bootstrap_codes, dones,
                           check_shape)

    def dequantize(self, batch, adv_raw, rtg_raw):
        return dequantize_results(self.cfg, batch, adv_raw, rtg_raw)

    def decode(self, batch, images, outs=None, values=None):
        cfg = self.cfg
        raw = [unpack_rows(cfg, region, data, T, M)
               for region, data, T, M in (images[:1] if values is not None else images)]
        adv, rtg = self.dequantize(batch, raw[0], raw[1] if len(raw) > 1 else None)
        if values is not None:
            rtg = adv + values
        if outs is not None:
            outs[0][...], outs[1][...] = adv, rtg
            return outs
        return adv, rtg


class NumbaPlan(NumpyPlan):
    """The compiled kernels of :mod:`sw.gae.hostfast`, bit-identical to :class:`NumpyPlan`;
    inputs they decline go to the :class:`NumpyPlan` it holds (``numpy``)."""

    backend = "numba"

    def __init__(self, cfg, settings: HostSettings):
        super().__init__(cfg, settings)
        self.numpy = NumpyPlan(cfg, settings)

    def quantize(self, r, v, last, d, gamma, lam, coefs, *, rounding="error_feedback"):
        cfg = self.cfg
        matched = rounding == "error_feedback"
        gh, glh = (float(gamma), float(gamma) * float(lam)) if coefs is None \
            else map(float, coefs)
        prep = hostfast.caller_units(r, v, last, d, gamma, lam, bits=cfg.code_bits,
                                     reg_format=cfg.reg_format,
                                     data_format=cfg.pe.data_format, matched=matched,
                                     coefs=(gh, glh))
        if prep is None:                    # declined: the numpy code, or its error
            return self.numpy.quantize(r, v, last, d, gamma, lam, coefs, rounding=rounding)
        prep["matched"] = matched
        return prep

    def result_stats(self, batch):
        stats = hostfast.result_stats(batch, self.cfg)
        return self.numpy.result_stats(batch) if stats is None else stats

    def images(self, reward_codes, value_codes, bootstrap_codes, dones, check_shape):
        images = hostfast.pack_codes(self.cfg, reward_codes, value_codes, bootstrap_codes,
                                     dones)
        if images is None:
            return self.numpy.images(reward_codes, value_codes, bootstrap_codes, dones,
                                     check_shape)
        return images

    def dequantize(self, batch, adv_raw, rtg_raw):
        return dequantize_results(self.cfg, batch, adv_raw, rtg_raw, take=hostfast.take)

    def decode(self, batch, images, outs=None, values=None):
        got = hostfast.decode_results(self.cfg, batch, images, outs, values)
        if got is None:                     # full results, a short image
            return super().decode(batch, images, outs, values)
        return got


PLANS = {"numba": NumbaPlan, "numpy": NumpyPlan}


def make_plan(cfg, settings: HostSettings, backend=None) -> QuantizationPlan:
    """The plan of ``backend`` (:func:`sw.gae.hostfast.choose_backend`: None is ``"numba"``
    where numba is installed, else ``"numpy"``)."""
    return PLANS[hostfast.choose_backend(backend)](cfg, settings)

