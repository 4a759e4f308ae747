"""What the end-to-end goals would take: the fastest an accelerator call could possibly be.

For each goal of the end-to-end benchmark (docs/benchmarks.md: GAE >= 3x at 64 x 1024, >= 10x after the
last environment step; replay sample/update >= 50x / 10x at B = 256; learner >= 10x at B = 64),
this prints the time the goal allows (``baseline_us / goal``, the baseline from the last
``make bench`` run, ``build/bench_e2e.json``) beside a **floor**: the sum of

* ``host_us``: the least host work the call cannot avoid, timed here as numba loops
  (quantizing the caller's floats to codes and packing the done bits; de-quantizing the
  results), zero for blocks whose inputs are already integers;
* ``bus_us``: only the payload, densely packed, at the bus model's bandwidth, plus one launch;
  **no** per-transfer cost (zero-copy buffers). Today's drivers add 17 us per transfer on
  Alveo (``scripts/bench/common.py``), shown as ``today_transfer_us``;
* ``kernel_us``: the exact cycles of the spec's cycle model at ``min(300 MHz, estimate)`` of
  the shipped module, for the shipped configuration and for larger ones the generators accept
  (never synthesized at that size: their clock is the shipped module's estimate).

A floor above the allowance means no driver of that shape can meet the goal on that bus, however
fast its host code; what could is named in ``docs/benchmarks.md``. Nothing here is simulated.
Run ``make bench`` first (the baselines come from its JSON); ``make bench-floor`` runs this and
writes ``build/bench_floor.json``.
"""

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench.common import ALVEO_PCIE, Env  # noqa: E402
from bench.replay import MODULES as REPLAY_MODULES  # noqa: E402
from sw.gae import spec as gae_spec  # noqa: E402
from sw.learner.schedule import step_cycles  # noqa: E402
from sw.registry import candidate_config, shipped_config  # noqa: E402
from sw.replay import spec as replay_spec  # noqa: E402
from sw.timing import TARGET_MHZ, clock_mhz  # noqa: E402

BENCH_JSON = ROOT / "build" / "bench_e2e.json"
OUT_JSON = ROOT / "build" / "bench_floor.json"


def host_kernels():
    """numba loops of the least host work GAE needs: codes in, floats out."""
    import numba

    @numba.njit(fastmath=True, cache=False)
    def quantize(x, scale, offset, out):
        for i in range(x.size):
            q = np.floor(x.flat[i] * scale + offset + np.float32(0.5))
            out.flat[i] = np.int8(min(max(q, -128.0), 127.0))

    @numba.njit(cache=False)
    def pack_bits(d, out):
        for i in range(out.size):
            b = 0
            for j in range(8):
                if d.flat[8 * i + j] != 0:
                    b |= 1 << j
            out[i] = b

    @numba.njit(fastmath=True, cache=False)
    def dequantize(c, v, scale, adv, ret):
        for i in range(c.size):
            a = np.float32(c.flat[i]) * scale
            adv.flat[i] = a
            ret.flat[i] = a + v.flat[i]

    return quantize, pack_bits, dequantize


def gae_host_us(T, N, kernels, env):
    """(host in, host out) microseconds (:meth:`bench.common.Env.best_of`): quantize rewards
    and values and pack the done bits; de-quantize advantages and form returns."""
    quantize, pack_bits, dequantize = kernels
    rng = np.random.default_rng(0)
    r = rng.standard_normal((T, N)).astype(np.float32)
    v = rng.standard_normal((T, N)).astype(np.float32)
    d = (rng.random((T, N)) < 0.02).astype(np.uint8)
    qr, qv = np.empty((T, N), np.int8), np.empty((T, N), np.int8)
    bits = np.empty(T * N // 8, np.uint8)
    adv, ret = np.empty((T, N), np.float32), np.empty((T, N), np.float32)
    s, o = np.float32(20.0), np.float32(0.0)

    def host_in():
        quantize(r, s, o, qr)
        quantize(v, s, o, qv)
        pack_bits(d, bits)

    def host_out():
        dequantize(qr, v, np.float32(0.05), adv, ret)

    t = env.best_of({"in": host_in, "out": host_out}, desc=f"host work {T}x{N}")
    return t["in"], t["out"]


def gae_rows(baselines, kernels, env):
    rows = []
    _, base = shipped_config("gae_kernel_n8")
    mhz, label = clock_mhz("gae_kernel_n8")
    code = base.code_bits // 8                    # bytes per code (the host loops: 8-bit)
    for T, N in ((1024, 64), (128, 8)):
        h_in, h_out = gae_host_us(T, N, kernels, env)
        pay_in = T * N * 2 * code + T * N // 8 + N * code   # r, v codes; done bits; bootstrap
        pay_out = T * N * code                    # advantage codes (returns on the host)
        for n_pe in (8, 64):                   # 64 PEs: one per trajectory, the most useful
            cfg = dataclasses.replace(base, n_pe=n_pe)
            kern = gae_spec.run_cycles(cfg, T, N)
            name = f"gae n_pe={n_pe} (shipped kernel gae_kernel_n{n_pe})"
            rows.append(_row("gae batch", name, f"T={T} x N={N}", baselines.get(("gae", T, N)),
                             3.0 if (T, N) == (1024, 64) else None, h_in + h_out,
                             pay_in + pay_out, 1, 2, kern, mhz, label))
            # streamed: codes pushed during the rollout; after the last step only the
            # bootstrap row, the run and the read-back remain.
            rows.append(_row("gae after last step", name, f"T={T} x N={N}",
                             baselines.get(("gae", T, N)),
                             10.0 if (T, N) == (1024, 64) else None, h_out, pay_out + N, 1, 2,
                             kern, mhz, label))
    return rows


def replay_rows(baselines):
    rows = []
    B = 256
    for module in REPLAY_MODULES.values():     # the shipped kernels the benchmark times
        _, cfg = shipped_config(module)
        mhz, label = clock_mhz(module)
        cap = cfg.capacity
        for op, goal, pay in (("sample", 50.0, B * 8), ("update", 10.0, B * 8)):
            kern = replay_spec.run_cycles(cfg, replay_spec.ReplayOp[op.upper()], B)
            rows.append(_row(f"replay {op}",
                             f"{module}: K=16, 2^{cap.bit_length() - 1} leaves", f"B={B}",
                             baselines.get(("replay", op, cap)), goal, 0.0, pay, 1, 1,
                             kern, mhz, label))
    return rows


#: Learner configurations: (label, fields replaced in the shipped 4 x 4 kernel's
#: configuration, the shipped module whose clock it runs at). DSP counts from docs/learner.md
#: (the shipped kernels synthesized; the DSE's ZCU106 pick modelled); 16 x 16 arrays need
#: about four times the 8 x 8 DSPs, more than the XCZU7EV has.
LEARNER_VARIANTS = (
    ("4x4 arrays (shipped learner_kernel_s4, 203 DSP)", {}, "learner_kernel_s4"),
    ("8x8 arrays (shipped learner_kernel_s8, 755 DSP: 44 % of the ZCU106)", {"array": 8},
     "learner_kernel_s8"),
    ("DSE ZCU106 pick: dp=2, 8x8 per stage (816 DSP modelled; 435 BRAM36: does not fit)",
     {k: getattr(candidate_config("learner_zcu106_dp2")[1], k)
      for k in ("array", "dp", "stage_arrays", "sub_batch", "max_batch")},
     "learner_kernel_s8"),
    ("16x16 arrays (> 3,000 DSP: Alveo only)", {"array": 16, "sub_batch": 16},
     "learner_kernel_s8"),
)


def learner_rows(baselines):
    rows = []
    _, base = shipped_config("learner_kernel_s4")
    obs = base.sizes[0]
    for name, fields, module in LEARNER_VARIANTS:
        mhz, label = clock_mhz(module)
        cfg = dataclasses.replace(base, **fields)
        for B in (64, 256):
            # obs, next obs, action, reward, done in; TD errors out (float32 words)
            pay = B * (2 * obs + 3) * 4 + B * 4
            rows.append(_row("learner DQN step", name, f"B={B}", baselines.get(("learner", B)),
                             10.0 if B == 64 else None, 0.0, pay, 1, 2, step_cycles(cfg, B),
                             mhz, label))
    return rows


def _row(what, config, shape, baseline, goal, host_us, payload, launches, transfers, cycles,
         mhz, label):
    """One row; ``cycles`` of the kernel at ``mhz`` (the shipped module's clock) and at the
    300 MHz target, the floor at both."""
    bus = ALVEO_PCIE
    bus_us = payload / bus.write_bytes_per_s * 1e6 + launches * bus.launch_us
    kernel_us, kernel300_us = cycles / mhz, cycles / TARGET_MHZ
    floor, floor300 = host_us + bus_us + kernel_us, host_us + bus_us + kernel300_us
    allowed = baseline / goal if (baseline is not None and goal) else None
    return {"what": what, "config": config, "shape": shape, "baseline_us": baseline,
            "goal": goal, "allowed_us": allowed, "host_us": host_us, "payload_bytes": payload,
            "bus_us": bus_us, "cycles": cycles, "kernel_us": kernel_us, "clock_mhz": mhz,
            "clock": label, "floor_us": floor, "floor_300_us": floor300,
            "today_transfer_us": transfers * bus.transfer_us,
            "best_ratio": (baseline / floor) if baseline is not None else None,
            "reachable": None if allowed is None else floor300 <= allowed}


def load_baselines(path):
    """``{key: baseline_us}`` from the rows of ``make bench``."""
    if not path.exists():
        raise SystemExit(f"{path} not found: run `make bench` first (the baselines come from it)")
    out = {}
    for r in json.loads(path.read_text()):
        shape, block = r["shape"], r["block"]
        if block == "gae" and "streamed" not in r["config"]:
            T, N = (int(x.split("=")[1]) for x in shape.split(" x "))
            out[("gae", T, N)] = r["baseline_us"]
        elif block == "replay":
            op = shape.split()[0]
            cap = 1 << int(shape.split("2^")[1])
            out[("replay", op, cap)] = r["baseline_us"]
        elif block == "learner":
            out[("learner", int(shape.split("B=")[1]))] = r["baseline_us"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-json", type=Path, default=BENCH_JSON,
                    help="rows of `make bench` (the baselines)")
    ap.add_argument("--json", type=Path, default=OUT_JSON, help="where to write the rows")
    args = ap.parse_args(argv)
    baselines = load_baselines(args.bench_json)
    env = Env()
    rows = (gae_rows(baselines, host_kernels(), env) + replay_rows(baselines)
            + learner_rows(baselines))
    print(f"load average {os.getloadavg()[0]:.1f}; bus {ALVEO_PCIE.name}, payload only, "
          f"zero-copy, {ALVEO_PCIE.launch_us:g} us launch; baselines from {args.bench_json}")
    hdr = ("what", "config", "shape", "baseline", "goal", "allowed", "host", "bus",
           "kernel @ clock", "floor", "floor @300", "best ratio", "goal reachable")
    print(" | ".join(hdr))
    for r in rows:
        f = (lambda x: "-" if x is None else f"{x:,.1f}")
        print(" | ".join([r["what"], r["config"], r["shape"], f(r["baseline_us"]),
                          "-" if r["goal"] is None else f"{r['goal']:g}x", f(r["allowed_us"]),
                          f(r["host_us"]), f(r["bus_us"]),
                          f"{r['kernel_us']:,.1f} @{r['clock_mhz']:.0f}", f(r["floor_us"]),
                          f(r["floor_300_us"]),
                          "-" if r["best_ratio"] is None else f"{r['best_ratio']:.2f}x",
                          {None: "-", True: "yes", False: "no"}[r["reachable"]]]))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
