"""A pure-Python GAE accelerator behind the driver's bus interfaces (no hardware, no simulator).

:class:`GoldenDevice` models what :class:`~rtl_gen.gae.accelerator.GaeAccelerator` shows on its
ports, at register level, with a virtual clock:

* ``s_axi_control``: the registers of :func:`~sw.gae.spec.gae_register_map` with their
  access types (clear-on-read AP_DONE/AP_READY, toggle-on-write IP_ISR, set-by-host AP_START
  cleared on ap_ready unless AUTO_RESTART), the ``interrupt`` line ``GIER & |IP_ISR``, the
  hardware-info registers, STATUS and CYCLES; unmapped addresses raise
  :class:`~sw.driver.mmio.BusError` (the RTL answers SLVERR);
* ``s_axi_mem``: the regions of :mod:`sw.gae.layout` (padding bytes read 0 and ignore writes,
  rows past ``config.depth`` too; the RTL leaves those undefined), locked with
  :class:`~sw.driver.mmio.BusError` while a run is in progress, as the RTL answers SLVERR;
* a run: started by AP_START while idle, arguments latched at the start, refused with
  STATUS.ERROR (done at once, memory untouched) exactly when the RTL refuses it
  (:func:`sw.gae.model.check_args`), otherwise computed by
  :func:`sw.gae.model.gae_core` and written back -- in place over the rewards and values,
  or to the ``adv``/``rtg`` regions -- for lanes of real trajectories only, ``run_cycles``
  cycles after the start (:meth:`sw.gae.spec.run_cycles`; CYCLES reads
  ``run_cycles - 1`` afterwards, as on the RTL); AP_START written while busy (without
  AUTO_RESTART) is dropped and sets STATUS.START_REFUSED.

The shell (registers, interrupt, memory locking, virtual clock) is
:class:`~sw.driver.golden_base.ApCtrlGoldenDevice`, shared with the other accelerators' golden
devices; this module adds the GAE core. Time: every control access costs ``access_cycles``
cycles, a memory access that plus one cycle per AXI word; :meth:`GoldenDevice.sleep` and :meth:`GoldenDevice.wait_interrupt` advance the
clock (an interrupt wait jumps straight to the event), so polling loops and timeouts behave as
on hardware but take no wall time. Cycle-level details of the CSR block (AP_IDLE one cycle late,
response latencies) are not modelled; with AUTO_RESTART, AP_DONE is set after every run (the
core shows ap_idle for a cycle between runs) and at most :data:`MAX_EVENTS` runs are modelled
per clock advance.
"""


from sw.driver.golden_base import MAX_EVENTS, ApCtrlGoldenDevice, Run
from sw.gae import spec as gae_spec
from sw.gae.layout import pack_rows, region_base, unpack_rows, word_bytes
from sw.gae.model import gae_core
from sw.gae.spec import (
    GAE_CORE_ARGS,
    STATUS_FLAGS,
    GaeCoreArgs,
    GaeCoreConfig,
    check_args,
    gae_register_map,
    hw_info_values,
)

__all__ = ["GoldenDevice", "MAX_EVENTS"]

_CORE_FLAGS = tuple(name for name in STATUS_FLAGS if name != "START_REFUSED")


class GoldenDevice(ApCtrlGoldenDevice):
    """The GAE accelerator as a Python model behind :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    config : GaeCoreConfig
        The accelerator configuration being modelled.
    clock_hz, access_cycles
        The virtual clock (see :class:`~sw.driver.golden_base.ApCtrlGoldenDevice`).

    Members
    -------
    config : GaeCoreConfig
    regmap, cycle, interrupt, runs, image
        Those of :class:`~sw.driver.golden_base.ApCtrlGoldenDevice` (``runs`` counts
        refused-by-argument runs too).
    """

    def __init__(self, config: GaeCoreConfig, *, clock_hz=250e6, access_cycles=25):
        if not isinstance(config, GaeCoreConfig):
            raise TypeError(f"config must be a GaeCoreConfig, not {config!r}")
        self._config = config
        super().__init__(gae_register_map(config), hw_info_values(config),
                         mem_bytes=1 << config.mem_addr_bits,
                         axi_bytes=config.axi_data_width // 8, status_flags=_CORE_FLAGS,
                         clock_hz=clock_hz, access_cycles=access_cycles)
        self.writable[:] = False
        for name in config.regions:
            base, wb = region_base(config, name), word_bytes(config, name)
            lanes = config.region_word_bits(name) // 8
            rows = self.writable[base:base + config.depth * wb].reshape(config.depth, wb)
            rows[:, :lanes] = True

    @property
    def config(self) -> GaeCoreConfig:
        return self._config

    # -- core ----------------------------------------------------------------------------------
    def _args(self) -> GaeCoreArgs:
        values = dict.fromkeys(GaeCoreArgs.__dataclass_fields__, 0)
        for name, (width, is_signed) in GAE_CORE_ARGS(self._config).items():
            values[name] = self._arg(name.upper(), signed=is_signed, width=width)
        return GaeCoreArgs(**values)

    def _begin(self) -> Run:
        args = self._args()
        cfg = self._config
        error = check_args(args, cfg)
        if error:
            return Run(error=error, length=1)
        return Run(length=gae_spec.run_cycles(cfg, args.num_timesteps, args.num_trajectories),
                   pending=self._compute(args))

    def _compute(self, args):
        cfg = self._config
        T, M = args.num_timesteps, args.num_trajectories
        G = -(-M // cfg.n_pe)
        full = G * cfg.n_pe

        def rows(region, n, **kw):
            base = region_base(cfg, region)
            data = self.image[base:base + n * G * word_bytes(cfg, region)].tobytes()
            return unpack_rows(cfg, region, data, n, full, **kw)

        rewards = rows("rewards", T)[:, :M]
        values = rows("values", T + 1)[:, :M]
        dones = rows("dones", T, signed=False)[:, :M].astype(bool)
        out = gae_core(rewards, values[:T], values[T], dones, args, cfg)
        targets = ("rewards", "values") if cfg.results == "inplace" else ("adv", "rtg")
        writes = []
        for region, result in zip(targets, (out["adv"], out["rtg"])):
            image = rows(region, T)                       # padding lanes keep their contents
            image[:, :M] = result
            writes.append((region_base(cfg, region), pack_rows(cfg, region, image)))
        return out, writes

    def _complete(self, pending):
        out, writes = pending
        for base, data in writes:
            self._store(base, data)
        return {name: int(out[name.lower()]) for name in _CORE_FLAGS}
