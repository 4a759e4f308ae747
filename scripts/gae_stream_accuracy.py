"""Accuracy of streamed GAE (GaeDriver.stream) against textbook GAE, beside the batch path
(docs/gae.md, "Streaming"): gae_accel_n8 golden device, caller units, gamma 0.99, lambda 0.95.
Run: PYNQ-free, ``PYTHONPATH=. python scripts/gae_stream_accuracy.py`` (a few seconds)."""

import warnings

import numpy as np

from sw.gae.device import GoldenDevice
from sw.gae.driver import GaeDriver
from sw.gae.golden import gae_reference
from sw.registry import shipped_config
from sw.rollouts import collect

_, cfg = shipped_config("gae_accel_n8")
rel = lambda x, y: np.sqrt(np.mean((x - y) ** 2) / np.mean(y ** 2))
warnings.simplefilter("ignore")
def data(kind, it):
    if kind == "random":
        rng = np.random.default_rng(it)
        T, M = 256, 8
        return (rng.normal(size=(T, M)), rng.normal(size=(T, M)), rng.random((T, M)) < 0.01,
                rng.normal(size=M))
    ro = collect("CartPole-v1", num_envs=8, num_steps=128, seed=it)
    return ro.rewards, ro.values, ro.dones, ro.last_values
for kind in ("random", "cartpole"):
    b, s, clip = [], [], []
    drv_b = GaeDriver(GoldenDevice(cfg)); drv_s = GaeDriver(GoldenDevice(cfg))
    for it in range(6):
        r, v, d, last = data(kind, it)
        ra, rr = gae_reference(r, v, d, last, 0.99, 0.95)
        a, g = drv_b.compute(r, v, d, last, 0.99, 0.95)
        T, M = r.shape
        st = drv_s.stream(M, T, 0.99, 0.95)
        for t in range(T): st.push(r[t], v[t], d[t])
        a2, g2 = st.finish(last)
        if it:   # the first stream is the batch path
            b.append((rel(a, ra), rel(g, rr))); s.append((rel(a2, ra), rel(g2, rr)))
            clip.append((st.clipped["reward"], st.clipped["value"]))
    b, s = np.array(b), np.array(s)
    (ba, bg), (sa, sg), (wa, wg) = 100 * b.mean(0), 100 * s.mean(0), 100 * s.max(0)
    print(f"{kind}: batch adv {ba:.2f} % (returns {bg:.2f} %), stream adv {sa:.2f} % "
          f"({sg:.2f} %), worst stream {wa:.2f} % ({wg:.2f} %); clipped (rewards, values) "
          f"per stream {clip}")
