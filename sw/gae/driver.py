"""Host driver of the HEPPO GAE accelerator: numpy arrays in, advantages and returns out.

:class:`GaeDriver` runs the same code on every :class:`~sw.driver.mmio.Device` (the golden
model, the Verilated RTL, a PYNQ board, an Alveo card)::

    drv = GaeDriver(device, config)           # or config=None: read back from HW_* registers
    adv, ret = drv.compute(rewards, values, dones, last_values, 0.99, 0.95)
    adv, ret = drv.compute(rewards, values, last_values=v_next, gamma=0.99, lam=0.95,
                           terminated=term, truncated=trunc, final_values=v_final)

:meth:`GaeDriver.compute` has the signature of :func:`sw.gae.golden.gae_reference` and does, in
order: **validation** before any bus access (shapes, dtypes, finiteness, ``gamma`` and ``lam``
in [0, 1], capacity ``(T + 1) * ceil(M / n_pe) <= depth``, ``M <= 4096``: ``ValueError`` naming
the argument); **quantization** by ``units`` (:mod:`sw.gae.batch`,
:class:`~sw.gae.quant.GaeQuantizationPipeline`) to ``code_bits`` codes and the dequantizer,
requantizer and coefficient registers; the **run** (:meth:`GaeDriver.run`, also usable on codes,
:mod:`sw.gae.bus`: the codes into the regions of :mod:`sw.gae.layout`, the registers, AP_START,
the interrupt or AP_DONE polling with a timeout, STATUS: ``ERROR`` raises :class:`GaeError`, the
overflow flags warn a :class:`GaeOverflowWarning` subclass, START_REFUSED warns
:class:`~sw.driver.common.StartRefusedWarning`); **read-back and de-quantization**, into new
float64 arrays or the caller's (``out=``). In the caller's units only the advantages are read
back: the returns are the advantages plus the caller's values (:mod:`sw.gae.results`,
"Returns").

Units of the results
    ``units="caller"`` (default): textbook GAE, :func:`~sw.gae.golden.gae_reference` of the
    caller's rewards, values and flags, in their units, within the quantization error; the
    same batch gives the same answer whatever came before. ``units="standardized"`` (HEPPO's
    training mode): GAE of the rewards standardized with running statistics over every call
    (:mod:`sw.gae.quant`), so not GAE of the caller's rewards and dependent on earlier calls;
    the critic must learn those returns. Consequences and measured errors: docs/gae.md,
    "Driver" and "Accuracy". :attr:`GaeDriver.last_batch` keeps what the last call computed.

Result scale (in-place results)
    The driver picks the requantizer registers of the results from the batch, and by default
    (``on_requant_overflow="retry"``) repeats a run whose results saturated with wider ranges:
    :mod:`sw.gae.results`, "Result scale". In the caller's units it then bounds the results'
    error and, where the bound exceeds ``result_tolerance`` (3 % relative RMS by default), runs
    the batch's error again to refine them: :mod:`sw.gae.results`, "Refinement".
"""

import dataclasses
import warnings

import numpy as np

from sw.driver.common import ControlOf, use_interrupt_arg, warn_level, written_registers
from sw.driver.common import positive as _positive
from sw.driver.mmio import Device
from sw.driver.regmap import RegisterMapAccess
from sw.registry import BLOCKS, family_vlnvs, vlnv

from . import hostfast
from .batch import (
    GaeBatch,
    HostSettings,
    check_batch,
    check_out,
    check_units,
    coefficient,
    episode_dones,
    flags,
)
from .bus import GaeBus
from .errors import (
    ClippingWarning,
    DequantOverflowWarning,
    GaeBusyError,
    GaeConfigMismatchError,
    GaeError,
    GaeOverflowWarning,
    GaeTimeoutError,
    PeOverflowWarning,
    RequantOverflowWarning,
)
from .golden import quantize_coefs
from .hwinfo import check_against, read_hw_config
from .pipeline import GaeQuantizationPipeline
from .plan import QuantizationPlan, make_plan
from .results import (
    MAX_REFINEMENTS,
    error_bounds,
    relative_error_bounds,
    residual_rewards,
    set_result_registers,
)
from .spec import (
    GAE_CORE_ARGS,
    GaeCoreArgs,
    GaeCoreConfig,
    gae_register_map,
)
from .stream import GaeStream

__all__ = [
    "GAE_KERNEL_NAME",
    "GAE_VLNV",
    "GAE_VLNVS",
    "ClippingWarning",
    "DequantOverflowWarning",
    "GaeBatch",
    "GaeBusyError",
    "GaeConfigMismatchError",
    "GaeDriver",
    "GaeError",
    "GaeOverflowWarning",
    "GaeTimeoutError",
    "HostSettings",
    "PeOverflowWarning",
    "RequantOverflowWarning",
    "read_hw_config",
]

#: IP-XACT VLNV prefix of packaged GAE accelerators: ``sw.registry.vlnv(module)`` gives
#: ``rlk:accel:<module>:1.0`` (the one definition, also used by ``ipx::package_project``), and
#: every GAE accelerator module's name starts with ``gae_accel`` (``gae_accel_n8``, ...).
GAE_VLNV = vlnv(BLOCKS["gae-accel"].module)
#: The VLNVs of the shipped GAE accelerators (what PYNQ binds :class:`GaeIP` to).
GAE_VLNVS = family_vlnvs("gae")

#: Kernel / IP instance base name (Vitis kernel name, PYNQ ``<name>_0`` instance).
GAE_KERNEL_NAME = "gae_accel"


class GaeDriver(GaeBus):
    """The GAE accelerator on any :class:`~sw.driver.mmio.Device`: the host side (inputs to
    codes, results to floats, retries, refinements, streams) over the code-level run of
    :class:`~sw.gae.bus.GaeBus` (``load``, ``start``, ``write_args``, ``wait``,
    ``read_results``, ``check_shape``).

    Parameters
    ----------
    device : Device
        Control port, memory port, interrupt, clock.
    config : GaeCoreConfig, dict or None
        The accelerator's configuration. It is always checked against the HW_* registers
        (:func:`read_hw_config`; mismatch: :class:`GaeConfigMismatchError`); None takes the
        configuration read back.
    pipeline : GaeQuantizationPipeline or None
        Standardization and quantization; default one with ``bits = config.code_bits`` and
        ``reg_format = config.reg_format`` (its running reward statistics live as long as the
        driver). A given pipeline must have those two.
    timeout : float
        Seconds (on the device's clock) a run may take beyond its expected cycle count at
        ``clock_hz``.
    clock_hz : float
        Clock assumed to turn cycles into seconds for the timeout (default 100 MHz).
    poll_interval : float
        Seconds between CTRL reads when polling.
    use_interrupt : bool or None
        Wait for the interrupt line (GIER/IP_IER enabled, IP_ISR cleared after each run);
        default ``device.has_interrupt``. Otherwise poll CTRL.AP_DONE (interrupts disabled).
    result_sigmas : float
        Width of the automatic in-place advantage range in standard deviations (module doc).
    result_range : (float, float) or None
        Fixed ``(R_A, R_G)`` in-place result ranges instead of the automatic choice.
    on_requant_overflow : str
        ``"retry"`` (default: widen the in-place result ranges and run again, see the module
        docstring) or ``"warn"`` (keep the saturated results, warn).
    result_tolerance : float or None
        In-place results in the caller's units: the bound on the relative RMS error of the
        advantages and of the returns against textbook GAE above which the driver refines the
        results with another run of the batch's error (:mod:`sw.gae.results`, "Refinement"),
        up to ``MAX_REFINEMENTS`` times; default 0.03. None never refines (one run, or more
        with ``"retry"``).
    units : str
        ``"caller"`` (default: textbook GAE of the caller's rewards and values, per call) or
        ``"standardized"`` (HEPPO's training mode: GAE of the dynamically standardized
        rewards, statistics in ``pipeline`` carried across calls); module docstring.
    clip_warning : float or (float, float)
        In standardized units, a batch with more than this fraction of its rewards (first) or
        values (second) outside the quantizers' clipping ranges warns
        :class:`ClippingWarning`: clipped rewards bias every advantage of their episodes.
        Default 0.1 % of the rewards, 1 % of the values (their ``+-4`` std range is the
        quantizer of least squared error; critics' heavy tails go past it: 0.3 % in PPO on
        CartPole).
    backend : str or None
        The host path of quantization, packing and de-quantization, chosen once for the
        driver's life: ``"numba"`` (the compiled kernels of :mod:`sw.gae.hostfast`) or
        ``"numpy"``, bit-identical; default ``"numba"`` where numba is installed
        (:func:`~sw.gae.hostfast.choose_backend`). The driver's :attr:`plan` does that
        work (:mod:`sw.gae.plan`); the driver drives the bus.

    Members
    -------
    config : GaeCoreConfig
    register_map : RegisterMapAccess
        PYNQ-style access to every register (``drv.register_map.STATUS.ERROR``).
    pipeline : GaeQuantizationPipeline
        Its running statistics are used (and updated) in standardized units only; in the
        caller's units only its ``reward_rounding`` is.
    units : str
    backend : str
        ``"numba"`` or ``"numpy"``, read-only.
    plan : QuantizationPlan
        The host computations of that backend (:mod:`sw.gae.plan`), read-only.
    host_settings : HostSettings
        The result-scale and clipping-warning parameters, read-only.
    last_batch : GaeBatch or None
        The batch of the last :meth:`compute`.
    last_status : dict
        STATUS fields and CYCLES of the last run.
    """

    def __init__(self, device: Device, config=None, *, pipeline=None, timeout=1.0,
                 clock_hz=100e6, poll_interval=1e-4, use_interrupt=None, result_sigmas=4.0,
                 result_range=None, on_requant_overflow="retry", result_tolerance=0.03,
                 units="caller", clip_warning=(1e-3, 1e-2), backend=None):
        config = self._init_args(device, config, GaeCoreConfig, timeout, clock_hz, poll_interval)
        self._backend = hostfast.choose_backend(backend)
        self._units = check_units(units)
        pair = clip_warning if isinstance(clip_warning, (tuple, list)) else (clip_warning,) * 2
        if len(pair) != 2 or any(isinstance(f, bool) or not isinstance(f, (int, float))
                                 or not 0 <= f <= 1 for f in pair):
            raise ValueError(f"clip_warning must be a fraction in [0, 1] or a pair of them "
                             f"(rewards, values), not {clip_warning!r}")
        sigmas = _positive(result_sigmas, "result_sigmas")
        if result_range is not None:
            if not (isinstance(result_range, (tuple, list)) and len(result_range) == 2):
                raise ValueError(f"result_range must be a pair (R_A, R_G) or None, "
                                 f"not {result_range!r}")
            result_range = tuple(_positive(r, "result_range") for r in result_range)
        self._settings = HostSettings(sigmas, result_range, tuple(float(f) for f in pair))
        if on_requant_overflow not in ("warn", "retry"):
            raise ValueError(f"on_requant_overflow must be 'warn' or 'retry', "
                             f"not {on_requant_overflow!r}")
        self._on_requant = on_requant_overflow
        if result_tolerance is not None and (
                isinstance(result_tolerance, bool)
                or not isinstance(result_tolerance, (int, float, np.integer, np.floating))
                or not 0 < result_tolerance < 1):
            raise ValueError(f"result_tolerance must be a number in (0, 1) or None, "
                             f"not {result_tolerance!r}")
        self._tolerance = None if result_tolerance is None else float(result_tolerance)
        self._use_irq = use_interrupt_arg(device, use_interrupt)
        # Nothing above touched the device; now read the hardware's own description.
        self._config = config = self._attach(device, config, read_hw_config, check_against)
        self._plan = make_plan(config, self._settings, self._backend)
        self.register_map = RegisterMapAccess(gae_register_map(config), ControlOf(device),
                                              written=written_registers(device))
        if pipeline is None:
            pipeline = GaeQuantizationPipeline(bits=config.code_bits,
                                               reg_format=config.reg_format,
                                               scale_format=config.scale_format)
        elif not isinstance(pipeline, GaeQuantizationPipeline):
            raise TypeError(f"pipeline must be a GaeQuantizationPipeline, not {pipeline!r}")
        rf = pipeline.reg_format
        if pipeline.bits != config.code_bits or (rf.width, rf.frac, rf.signed) != (
                config.reg_width, config.reg_frac, True) \
                or pipeline.scale_format != config.scale_format:
            raise ValueError(f"pipeline must have bits={config.code_bits}, reg_format "
                             f"{config.reg_format} and scale_format {config.scale_format}, not "
                             f"bits={pipeline.bits}, {rf}, {pipeline.scale_format}")
        self.pipeline = pipeline
        self.units = self._units
        self.last_batch = None
        self.last_status = {}
        self._stream = None
        #: what the last stream saw (:class:`~sw.gae.stream.StreamReference`), the next one's
        #: quantization scales
        self.stream_reference = None

    @property
    def backend(self) -> str:
        """``"numba"`` or ``"numpy"``: the host path chosen at construction (its streams'
        too)."""
        return self._backend

    @property
    def plan(self) -> QuantizationPlan:
        """The host side's inputs -> codes and scales -> results (:mod:`sw.gae.plan`) of
        :attr:`backend`, with :attr:`host_settings`: what :meth:`compute` and a
        :class:`~sw.gae.stream.GaeStream` call. Read-only."""
        return self._plan

    @property
    def host_settings(self) -> HostSettings:
        """``result_sigmas``, ``result_range`` and ``clip_warning`` as given to the
        constructor (checked; ``clip_warning`` as a pair): what a
        :class:`~sw.gae.stream.GaeStream` applies as :meth:`compute` does. Read-only."""
        return self._settings

    # -- validation and quantization (no bus access) ------------------------------------------
    def prepare(self, rewards, values, dones=None, last_values=None, gamma=None, lam=None, *,
                episode_starts=None, next_done=None, terminated=None, truncated=None,
                final_values=None) -> GaeBatch:
        """Validate and quantize one batch (arguments as :meth:`compute`); in standardized
        units this updates the running reward statistics.

        Raises ``ValueError`` (before any bus access and before the statistics change) for any
        invalid argument; see the module docstring.
        """
        for name, x in (("last_values", last_values), ("gamma", gamma), ("lam", lam)):
            if x is None:
                raise ValueError(f"{name} is required")
        # caller's units: prepare_caller_units checks finiteness (the compiled kernels' first
        # pass does, with no pass of its own)
        r, v, last = check_batch(rewards, values, last_values,
                                 finite=self._units != "caller")
        T, M = r.shape
        gamma = coefficient(gamma, "gamma")
        lam = coefficient(lam, "lam")
        if self._units == "standardized" and truncated is not None and np.any(
                flags(truncated, "truncated", (T, M))):
            raise ValueError("truncated steps need units='caller': in standardized units the "
                             "final observations' values cannot be folded into the rewards "
                             "before their standardization")
        d, r, _ = episode_dones((T, M), gamma, r, dones=dones, episode_starts=episode_starts,
                                next_done=next_done, terminated=terminated,
                                truncated=truncated, final_values=final_values)
        self.check_shape(T, M)
        if self._units == "caller":
            return self._caller_batch(r, v, last, d, gamma, lam)
        prep = self.pipeline.prepare(r, v, last)
        self._warn_clipping(prep)
        return self._batch(gamma, lam, quantize_coefs(gamma, lam, self._config.pe), d, prep,
                           units="standardized")

    def _caller_batch(self, r, v, last, d, gamma, lam):
        """The batch of checked arrays in the caller's units (:meth:`QuantizationPlan.quantize
        <sw.gae.plan.QuantizationPlan.quantize>`), keeping them for a refinement."""
        cf = 2.0 ** -self._config.pe.coef_frac
        g_raw, gl_raw = quantize_coefs(gamma, lam, self._config.pe)
        prep = self._plan.quantize(r, v, last, d, gamma, lam, (g_raw * cf, gl_raw * cf),
                                   rounding=self.pipeline.reward_rounding)
        return self._batch(gamma, lam, (g_raw, gl_raw), d, prep, units="caller", values=v,
                           rewards=r, last_values=last)

    def _batch(self, gamma, lam, coefs, d, prep, *, result_range=None, **kw):
        """The :class:`GaeBatch` of quantized inputs ``prep`` (``coefs``: the raw GAMMA and
        GAMMA_LAMBDA), with its result registers (from ``result_range``, caller's units, if
        given, else the driver's choice)."""
        cfg = self._config
        T, M = d.shape
        g_raw, gl_raw = coefs
        args = GaeCoreArgs(T, M, g_raw, gl_raw, prep["reward_scale_raw"],
                           prep["reward_offset_raw"], prep["value_scale_raw"],
                           prep["value_offset_raw"])
        codes = {"rewards": prep["reward_codes"], "values": prep["value_codes"],
                 "bootstrap": prep["bootstrap_codes"], "dones": d}
        batch = GaeBatch(T, M, gamma, lam, codes, args, prep,
                         unit_scale=prep.get("unit_scale", 1.0), **kw)
        if cfg.results == "inplace":
            self._plan.result_scale(batch, result_range)
        return batch

    def _warn_clipping(self, prep):
        pipe, bad, limits = self.pipeline, [], self._settings.clip_warning
        for stream, q, limit in (("reward", pipe.reward_quantizer, limits[0]),
                                 ("value", pipe.value_quantizer, limits[1])):
            frac = prep[f"{stream}_clipped"]
            if frac > limit:
                bad.append(f"{100 * frac:.3g} % of the {stream}s clipped at +-{q.clip:g} std "
                           f"(more than {100 * limit:g} %)")
        if bad:
            warnings.warn(f"GAE input clipping: {'; '.join(bad)}: their advantages are biased; "
                          f"units='caller' never clips", ClippingWarning,
                          stacklevel=warn_level())

    # -- statistics state (standardized units) ------------------------------------------------
    def reset(self):
        """Forget the running reward statistics (standardized units) and the statistics the
        next stream's scales come from (:attr:`stream_reference`)."""
        self.pipeline.reset()
        self.stream_reference = None

    # -- streaming (HEPPO's FILO stack filled during the rollout) -----------------------------
    def stream(self, n_envs, horizon, gamma, lam, *, flush_rows=None):
        """A :class:`~sw.gae.stream.GaeStream` of ``horizon`` time steps of ``n_envs``
        trajectories: ``push`` each step as the rollout produces it, ``finish`` with the
        bootstrap values (:mod:`sw.gae.stream`). ``flush_rows``: steps staged on the host
        per write to the accelerator (default :data:`~sw.gae.stream.FLUSH_ROWS`; 1 writes
        every step). One stream at a time; :meth:`compute` and :meth:`run` refuse while one
        is open."""
        self._check_no_stream()
        self._stream = GaeStream(self, n_envs, horizon, gamma, lam, flush_rows)
        return self._stream

    def _check_no_stream(self):
        if self._stream is not None and self._stream.is_open:
            raise RuntimeError("a GaeStream is open on this driver (its codes are in the "
                               "accelerator's memory): finish() or abort() it first")

    def state_dict(self) -> dict:
        """``units`` and the pipeline's :meth:`~sw.gae.quant.GaeQuantizationPipeline.state_dict`
        (configuration and running reward statistics), as plain Python values."""
        return {"units": self._units, "pipeline": self.pipeline.state_dict()}

    def load_state_dict(self, state: dict):
        """Restore the running reward statistics of a :meth:`state_dict`; ``ValueError`` if it
        comes from a driver with other units or another pipeline configuration."""
        if not isinstance(state, dict) or set(state) != {"units", "pipeline"}:
            raise ValueError("state must be a dict with keys 'units' and 'pipeline' "
                             "(GaeDriver.state_dict)")
        if state["units"] != self._units:
            raise ValueError(f"state has units={state['units']!r}, this driver "
                             f"{self._units!r}")
        self.pipeline.load_state_dict(state["pipeline"])
        return self

    def _set_result_registers(self, batch, adv_range, rtg_range):
        set_result_registers(batch, self._config, adv_range, rtg_range)

    def dequantize(self, batch: GaeBatch, adv_raw, rtg_raw):
        """Result codes (in place) or data-format words (full) as float64 ``(adv, returns)``."""
        return self._plan.dequantize(batch, adv_raw, rtg_raw)

    # -- the code-level run (sw.gae.bus) ------------------------------------------------------
    def run(self, reward_codes, value_codes, bootstrap_codes, dones, args: GaeCoreArgs, *,
            timeout=None) -> dict:
        """Load, start, wait, read back: the code-level run, the same dict as
        :func:`sw.gae.model.gae_core` (``error`` 0, ``adv``, ``rtg``, the flags) plus
        ``cycles``. A refused run raises :class:`GaeError` instead of returning its code; the
        flags also warn (after the results are read)."""
        self._check_no_stream()
        out = self._run(reward_codes, value_codes, bootstrap_codes, dones, args, timeout)
        self._warn(self.last_status)
        return out

    # -- the whole thing -------------------------------------------------------------------------
    def compute(self, rewards, values, dones=None, last_values=None, gamma=None, lam=None, *,
                episode_starts=None, next_done=None, terminated=None, truncated=None,
                final_values=None, out=None):
        """GAE on the accelerator: ``(advantages, returns)``, float64 ``[T, M]``.

        Same signature as :func:`sw.gae.golden.gae_reference`, with ``dones[t]`` = the episode
        ended at step t; instead of ``dones`` the keyword pairs ``episode_starts`` +
        ``next_done`` (SB3/CleanRL) or ``terminated`` + ``truncated`` (+ ``final_values``;
        gymnasium) (:mod:`sw.gae.batch`). Results in the caller's units by default
        (``units="caller"``: textbook GAE of the given rewards and values, within the
        quantization error, nothing carried between calls), or in standardized-reward units
        (``units="standardized"``, module docstring). ``out``: a pair of C-contiguous float32
        or float64 ``[T, M]`` arrays (e.g. a rollout buffer's advantages and returns) the
        results are written into and returned, instead of two new float64 arrays. Raises
        ``ValueError`` before any bus access for invalid input, :class:`GaeError`,
        :class:`GaeTimeoutError`, :class:`GaeBusyError` for a failed run; warns
        :class:`GaeOverflowWarning` subclasses and :class:`ClippingWarning`. With
        ``on_requant_overflow="retry"`` a saturated in-place result reruns the batch with both
        result ranges doubled (at most up to their rigorous bounds).
        """
        self._check_no_stream()
        batch = self.prepare(rewards, values, dones, last_values, gamma, lam,
                             episode_starts=episode_starts, next_done=next_done,
                             terminated=terminated, truncated=truncated,
                             final_values=final_values)
        return self.execute(batch, out=out)

    def execute(self, batch: GaeBatch, *, loaded=(), out=None):
        """Run a prepared batch (:meth:`prepare`, or a :class:`~sw.gae.stream.GaeStream`'s):
        load, start, wait, read back, de-quantize, with the in-place retries and refinements
        of :meth:`compute`. ``(advantages, returns)``, in ``out`` if given (:meth:`compute`).
        ``loaded``: the argument register names already written and the codes already in
        memory (a stream's first run: then only the other registers are written and nothing
        is loaded; a retry loads everything).

        In the caller's units the returns are the advantages plus the caller's values, so
        only the advantages are read back, unless the run saturated a result and is retried
        (which needs both results' saturation). A batch that keeps the caller's inputs
        (``batch.rewards``, :meth:`compute`'s) is refined while its error bound exceeds
        ``result_tolerance`` (:mod:`sw.gae.results`, "Refinement")."""
        outs = check_out(out, batch.T, batch.M)
        self.last_batch = batch
        batch.refinements, batch.error_bound = [], None
        if (self._tolerance is None or batch.rewards is None
                or self._config.results != "inplace"):
            return self._execute_runs(batch, loaded, outs)
        # refinements add into float64 results; float32 ones are written at the end
        f64 = outs is not None and all(o.dtype == np.float64 for o in outs)
        adv, ret = self._refine(batch, *self._execute_runs(batch, loaded,
                                                           outs if f64 else None))
        if outs is not None and not f64:
            outs[0][...], outs[1][...] = adv, ret
            return outs
        return adv, ret

    def _refine(self, batch: GaeBatch, adv, ret):
        """Bound the error of ``batch``'s results ``adv``, ``ret`` (float64, updated in place)
        and refine them while the bound exceeds ``result_tolerance``: :mod:`sw.gae.results`,
        "Refinement"."""
        stage = batch
        for k in range(MAX_REFINEMENTS + 1):
            bounds = error_bounds(stage, self._config)
            batch.error_bound = relative_error_bounds(bounds, stage.result_run[0], adv, ret)
            if (max(batch.error_bound) <= self._tolerance or k == MAX_REFINEMENTS
                    or stage.status.get("REQUANT_OVERFLOW")):      # saturated: no bound
                break
            stage = self._residual_batch(batch, residual_rewards(batch, adv),
                                         float(bounds.max()))
            batch.refinements.append(stage)
            adv += self._execute_runs(stage, (), None)[0]
            np.add(adv, batch.values, out=ret)
        return adv, ret

    def _residual_batch(self, batch: GaeBatch, rho, bound):
        """The refinement batch of ``batch``: rewards ``rho`` (:func:`residual_rewards`),
        zero values, both result ranges ``bound`` (the error bound of the results it
        refines, with a margin of 1/64) in the caller's units."""
        zeros = np.zeros((batch.T, batch.M))
        cf = 2.0 ** -self._config.pe.coef_frac
        coefs = (batch.args.gamma, batch.args.gamma_lambda)
        d = batch.codes["dones"]
        prep = self._plan.quantize(rho, zeros, zeros[0], d, batch.gamma, batch.lam,
                                   (coefs[0] * cf, coefs[1] * cf),
                                   rounding=self.pipeline.reward_rounding)
        rng = bound * (1.0 + 2.0 ** -6)
        return self._batch(batch.gamma, batch.lam, coefs, d, prep, result_range=(rng, rng),
                           units="caller", values=zeros, rewards=rho, last_values=zeros[0])

    def _execute_runs(self, batch: GaeBatch, loaded, outs):
        """:meth:`execute` without refinements: the run and its in-place retries."""
        c = batch.codes
        batch.runs, batch.run_args = 0, []
        caller = batch.values is not None
        which = (0,) if caller else (0, 1)
        qmax, results, saturated = self._config.code_max, None, None
        origin = [np.zeros((batch.T, batch.M), np.int8) for _ in (0, 1)]
        while True:
            if batch.runs == 0 and loaded:
                names = [n for n in GAE_CORE_ARGS(self._config) if n not in loaded]
                self.start(batch.args, names=names)
                out = self._results(self._wait(None), batch.T, batch.M, which=which)
            else:
                out = self._run(c["rewards"], c["values"], c["bootstrap"], c["dones"],
                                batch.args, images=True, which=which)
            batch.run_args.append(dataclasses.replace(batch.args))
            batch.runs += 1
            retry = (out["requant_overflow"] and self._on_requant == "retry"
                     and (batch.adv_range < batch.adv_bound
                          or batch.rtg_range < batch.rtg_bound))
            if results is None and not retry:          # one run: straight into the results
                results = self._plan.decode(batch, [out["adv"], out["rtg"]], outs,
                                            batch.values)
                break
            if out["rtg"] is None:                     # the saturation of both is needed
                out["rtg"] = self._read_images(batch.T, batch.M, (1,))[0]
            # Results decode with the registers of their own run; an element keeps the result
            # of the narrowest run in which its code did not saturate.
            decoded = self._plan.decode(batch, (out["adv"], out["rtg"]))

            def sat():
                return [np.abs(x) >= qmax for x in self._unpack((out["adv"], out["rtg"]))] \
                    if self._config.results == "inplace" else [False, False]
            if results is None:
                results = list(decoded)
            else:
                now = sat()
                for i in (0, 1):
                    results[i] = np.where(saturated[i], decoded[i], results[i])
                    origin[i][saturated[i]] = batch.runs - 1
                    saturated[i] = saturated[i] & now[i]
            if not retry:
                if caller:                   # caller's units: sw.gae.results, "Returns"
                    results[1] = results[0] + batch.values
                if outs is not None:
                    outs[0][...], outs[1][...] = results
                    results = outs
                break
            if saturated is None:            # only a retry needs the first run's saturation
                saturated = sat()
            self._set_result_registers(batch, min(2 * batch.adv_range, batch.adv_bound),
                                       min(2 * batch.rtg_range, batch.rtg_bound))
        batch.status = dict(self.last_status)
        batch.result_run = (origin[0], origin[1])
        self._warn(self.last_status)
        return results[0], results[1]
