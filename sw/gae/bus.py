"""The GAE accelerator's bus protocol at the level of codes: :class:`GaeBus`, the base of
:class:`~sw.gae.driver.GaeDriver`.

What it does on any :class:`~sw.driver.mmio.Device`, with no float in sight: the codes into the
memory regions of :mod:`sw.gae.layout` (:meth:`GaeBus.load`, checked before any bus access),
the argument registers (:meth:`GaeBus.write_args`, only those that change) and AP_START
(:meth:`GaeBus.start`), the interrupt or AP_DONE polling with a timeout and STATUS
(:meth:`GaeBus.wait`: ``ERROR`` raises :class:`~sw.gae.errors.GaeError`, the overflow flags warn
a :class:`~sw.gae.errors.GaeOverflowWarning` subclass, START_REFUSED warns
:class:`~sw.driver.common.StartRefusedWarning`), the raw results read back
(:meth:`GaeBus.read_results`). :class:`~sw.gae.driver.GaeDriver` adds the host side: inputs to
codes and results to floats (its plan, :mod:`sw.gae.plan`), the in-place retries and
refinements, streams.
"""

import operator
import warnings

from sw.driver.common import DriverBase, StartRefusedWarning, warn_level

from . import spec as gae_spec
from .errors import FLAG_WARNINGS, GaeBusyError, GaeError, GaeTimeoutError
from .layout import region_base, unpack_rows, word_bytes
from .spec import GAE_CORE_ARGS, GaeCoreArgs

__all__ = ["GaeBus"]


class GaeBus(DriverBase):
    """The code-level run of the GAE accelerator (module docstring). A subclass sets what
    :class:`~sw.driver.common.DriverBase` needs (``_config``, ``_device``, ``register_map``,
    ``_use_irq``, the timeouts) and ``_plan``, the :class:`~sw.gae.plan.QuantizationPlan` whose
    ``images`` packs the codes :meth:`load` writes.

    Members
    -------
    last_status : dict
        STATUS fields and CYCLES of the last run (set by the subclass's constructor, then by
        every :meth:`wait`).
    """

    #: name -> (register, width, signed, lo, hi) of the run arguments (:meth:`write_args`)
    _arg_spec = None

    def check_shape(self, T: int, M: int):
        """``ValueError`` unless a run of T steps and M trajectories fits the accelerator."""
        cfg = self._config
        if T < 1 or M < 1:
            raise ValueError(f"need at least one time step and one trajectory, not T={T}, "
                             f"M={M}")
        G = -(-M // cfg.n_pe)
        if M > 4096 or (T + 1) * G > cfg.depth:
            raise ValueError(
                f"T={T} steps x M={M} trajectories do not fit: they need (T + 1) * "
                f"ceil(M / n_pe) = {T + 1} * {G} = {(T + 1) * G} memory words (and M <= 4096), "
                f"the accelerator has {cfg.depth} (e.g. T <= {cfg.depth // G - 1} for this M)")

    def load(self, reward_codes, value_codes, bootstrap_codes, dones):
        """Write one batch of codes into the memory regions (the accelerator must be idle).

        ``reward_codes``, ``value_codes``: integer ``[T, M]`` in ``-2**(b-1)..2**(b-1)-1``;
        ``bootstrap_codes``: ``[M]``; ``dones``: bool-like ``[T, M]``. Checked before any
        bus access.
        """
        cfg, mem = self._config, self._device.memory
        for region, image in self._plan.images(reward_codes, value_codes, bootstrap_codes,
                                               dones, self.check_shape):
            mem.write(region_base(cfg, region), image)

    def start(self, args: GaeCoreArgs, *, names=None):
        """Write the argument registers and set AP_START (interrupt armed if used).

        Reads CTRL first (which also clears a stale AP_DONE): if AP_IDLE is 0 a run is in
        progress and :class:`GaeBusyError` is raised before anything is written. ``names``:
        write only these arguments (the others were written before, e.g. by a
        :class:`~sw.gae.stream.GaeStream`).
        """
        self.write_args(args, names)
        self._start()
        self._expected_cycles = gae_spec.run_cycles(self._config, max(1, args.num_timesteps),
                                                   max(1, args.num_trajectories))

    def write_args(self, args: GaeCoreArgs, names=None):
        """Check the accelerator is idle (:class:`GaeBusyError`), then write the argument
        registers ``names`` (default all) of ``args``, without starting."""
        if not isinstance(args, GaeCoreArgs):
            raise TypeError(f"args must be a GaeCoreArgs, not {args!r}")
        gae_spec.check_registers(args, self._config, names, prefix="args.")
        spec = self._arg_spec
        if spec is None:                 # per configuration, once: the registers' ranges
            spec = self._arg_spec = {
                name: (name.upper(), width, is_signed,
                       -(1 << (width - 1)) if is_signed else 0,
                       (1 << (width - 1)) - 1 if is_signed else (1 << width) - 1)
                for name, (width, is_signed) in GAE_CORE_ARGS(self._config).items()}
        if names is not None:
            spec = {n: spec[n] for n in names if n in spec}
        words = {}
        for name, (reg, width, is_signed, lo, hi) in spec.items():
            value = getattr(args, name)
            if type(value) is not int:
                try:
                    value = operator.index(value)
                except TypeError:
                    raise ValueError(f"args.{name} must be an integer, not {value!r}") \
                        from None
            if not lo <= value <= hi:
                raise ValueError(f"args.{name} must be in {lo}..{hi} ({width}-bit "
                                 f"{'signed' if is_signed else 'unsigned'}), not {value}")
            words[reg] = value & ((1 << width) - 1)
        rm = self.register_map
        if not self._idle():
            raise GaeBusyError("the accelerator is busy (CTRL.AP_IDLE = 0): a run is in "
                               "progress")
        for name, word in words.items():     # only when they change (raw words by name)
            rm.write_word_changed(name, word)

    def wait(self, timeout=None) -> dict:
        """Wait for AP_DONE, then check STATUS. Returns the STATUS fields and ``CYCLES``.

        Raises
        ------
        GaeTimeoutError
            No AP_DONE within ``timeout`` seconds (default: the driver's ``timeout`` plus the
            expected run time at ``clock_hz``).
        GaeError
            STATUS.ERROR is not 0 (the run was refused; memory untouched).

        Warns
        -----
        GaeOverflowWarning subclasses for the overflow flags, StartRefusedWarning.
        """
        status = self._wait(timeout)
        self._warn(status)
        return status

    def _wait(self, timeout):
        rm = self.register_map
        status = self._wait_done(timeout, GaeTimeoutError)
        status["CYCLES"] = rm.read_word("CYCLES")
        self.last_status = status
        if status["ERROR"]:
            raise GaeError(status["ERROR"])
        return status

    @staticmethod
    def _warn(status):
        level = warn_level()                # the first caller outside this package
        for name, cls in FLAG_WARNINGS.items():
            if status[name]:
                warnings.warn(f"GAE accelerator STATUS.{name}: "
                              f"{cls.__doc__.split(': ', 1)[1]}", cls, stacklevel=level)
        if status["START_REFUSED"]:
            warnings.warn("GAE accelerator STATUS.START_REFUSED: AP_START was written while "
                          "the run was in progress and was dropped", StartRefusedWarning,
                          stacklevel=level)

    def read_results(self, T: int, M: int):
        """The raw results of the last run: ``(adv, rtg)`` ``[T, M]`` int64 arrays (codes in
        place, data-format words for full results)."""
        return self._unpack(self._read_images(T, M))

    def _read_images(self, T, M, which=(0, 1)):
        """``[(region, bytes, T, M)]``: the memory images of the results ``which`` (0: the
        advantages, 1: the returns)."""
        cfg = self._config
        self.check_shape(T, M)
        regions = ("rewards", "values") if cfg.results == "inplace" else ("adv", "rtg")
        G = -(-M // cfg.n_pe)
        return [(regions[i], self._device.memory.read(region_base(cfg, regions[i]),
                                                      T * G * word_bytes(cfg, regions[i])),
                 T, M)
                for i in which]

    def _unpack(self, images):
        return tuple(unpack_rows(self._config, r, data, T, M) for r, data, T, M in images)

    def _run(self, reward_codes, value_codes, bootstrap_codes, dones, args, timeout=None, *,
             images=False, which=(0, 1)):
        """Load, start, wait, read back: :meth:`GaeDriver.run <sw.gae.driver.GaeDriver.run>`
        without its warnings; ``images``: ``adv`` and ``rtg`` are :meth:`_read_images`'s
        (``rtg`` None unless ``which`` has 1)."""
        self.load(reward_codes, value_codes, bootstrap_codes, dones)
        self.start(args)
        return self._results(self._wait(timeout), args.num_timesteps, args.num_trajectories,
                             images, which)

    def _results(self, status, T, M, images=True, which=(0, 1)):
        got = self._read_images(T, M, which)
        if not images:
            got = self._unpack(got)
        adv, rtg = got if len(got) == 2 else (got[0], None)
        return {"error": 0, "adv": adv, "rtg": rtg, "cycles": status["CYCLES"],
                **{name.lower(): bool(status[name]) for name in FLAG_WARNINGS}}

