"""The TorchRL adapters (:mod:`sw.adapters.torchrl`) against TorchRL's own GAE and prioritized
sampler on the same data (random batches, CartPole rollouts of TorchRL's ``GymEnv``), and
against the project's drivers.

TorchRL's C++ extension (its segment trees) does not load with torch 2.13 (torchrl 0.14.1):
its ``PrioritizedSampler`` runs here on the numpy trees of :mod:`adapters.segment_trees`, the
rest of it unchanged.
"""

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer
from torchrl.envs import GymEnv
from torchrl.objectives.value import GAE
from torchrl.objectives.value.functional import generalized_advantage_estimate

from adapters import segment_trees
from sw.adapters.torchrl import AcceleratedGAE, AcceleratedPrioritizedSampler
from sw.driver import GaeDriver, GoldenDevice
from sw.replay.spec import td_priorities

GAMMA, LAM = 0.99, 0.95


def rel(x, ref):
    return float(((x - ref) ** 2).mean().sqrt() / (ref ** 2).mean().sqrt())


# -- GAE -----------------------------------------------------------------------------------------
def random_rollout(seed, B=4, T=64, consistent=True):
    """A ``[B, T]`` tensordict as a collector writes it: terminations, truncations, next values
    that are the following step's values within an episode (or not, ``consistent=False``)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(B, T + 1, 1, generator=g).mul(0.6).cumsum(1)
    done = torch.rand(B, T, 1, generator=g) < 0.06
    term = done & (torch.rand(B, T, 1, generator=g) < 0.5)
    nv = v[:, 1:].clone() if consistent else torch.randn(B, T, 1, generator=g)
    nv[done & ~term] += torch.randn(int((done & ~term).sum()), generator=g)
    return TensorDict({"state_value": v[:, :-1],
                       "next": {"state_value": nv, "done": done, "terminated": term,
                                "reward": torch.randn(B, T, 1, generator=g)}}, [B, T])


def cartpole_rollouts(B=4, T=200):
    """``[B, T]`` CartPole-v1 steps of TorchRL's GymEnv (random policy, auto-reset)."""
    tds = []
    for b in range(B):
        env = GymEnv("CartPole-v1")
        env.set_seed(b)
        torch.manual_seed(b)
        tds.append(env.rollout(T, break_when_any_done=False))
        env.close()
    return torch.stack(tds)


def critic():
    torch.manual_seed(0)
    return TensorDictModule(torch.nn.Linear(4, 1), in_keys=["observation"],
                            out_keys=["state_value"])


@pytest.mark.parametrize("consistent", [True, False])
def test_gae_equals_torchrl_on_random_rollouts(consistent):
    td = random_rollout(1, consistent=consistent)
    ref = GAE(gamma=GAMMA, lmbda=LAM, value_network=None)(td.clone())
    acc = AcceleratedGAE(gamma=GAMMA, lmbda=LAM)(td.clone())
    assert rel(acc["advantage"], ref["advantage"]) <= 0.03
    assert rel(acc["value_target"], ref["value_target"]) <= 0.03
    assert acc["advantage"].shape == ref["advantage"].shape and acc["advantage"].dtype == \
        torch.float32
    # TorchRL's functional form gives TorchRL's estimator's numbers.
    adv, _ = generalized_advantage_estimate(
        GAMMA, LAM, td["state_value"], td["next", "state_value"], td["next", "reward"],
        td["next", "done"], td["next", "terminated"], time_dim=-2)
    torch.testing.assert_close(adv, ref["advantage"], rtol=1e-5, atol=1e-5)


def test_gae_is_the_driver_on_the_same_data():
    """With next values that are the following step's values, the estimator hands the
    driver exactly TorchRL's data in gymnasium's flag convention: bit for bit the driver."""
    td = random_rollout(2)
    est = AcceleratedGAE(gamma=GAMMA, lmbda=LAM)
    out = est(td.clone())
    cfg = est.driver.config
    drv = GaeDriver(GoldenDevice(cfg), cfg)

    def tm(x, dtype=np.float64):
        return x[..., 0].T.numpy().astype(dtype)           # [B, T, 1] -> [T, B]

    term, done = tm(td["next", "terminated"], bool), tm(td["next", "done"], bool)
    nv = tm(td["next", "state_value"])
    # TorchRL keeps gamma and lambda in float32 buffers; the estimator passes those values
    gamma, lam = float(est.gamma), float(est.lmbda)
    adv, _ = drv.compute(tm(td["next", "reward"]), tm(td["state_value"]), last_values=nv[-1],
                         gamma=gamma, lam=lam, terminated=term, truncated=done & ~term,
                         final_values=nv)
    np.testing.assert_array_equal(out["advantage"][..., 0].T.numpy(), adv.astype(np.float32))


def test_gae_on_cartpole_with_a_value_network():
    td = cartpole_rollouts()
    assert td["next", "done"].any()
    ref = GAE(gamma=GAMMA, lmbda=LAM, value_network=critic())(td.clone())
    acc = AcceleratedGAE(gamma=GAMMA, lmbda=LAM, value_network=critic())(td.clone())
    assert rel(acc["advantage"], ref["advantage"]) <= 0.03
    assert rel(acc["value_target"], ref["value_target"]) <= 0.03
    torch.testing.assert_close(acc["state_value"], ref["state_value"])


def test_gae_time_dim_keys_and_average():
    td = random_rollout(3, B=3, T=40)
    ref = GAE(gamma=GAMMA, lmbda=LAM, value_network=None, average_gae=True)
    acc = AcceleratedGAE(gamma=GAMMA, lmbda=LAM, average_gae=True)
    for est in (ref, acc):
        est.set_keys(advantage="adv", value_target="target")
    a, b = ref(td.clone()), acc(td.clone())
    assert "advantage" not in b.keys() and rel(b["adv"], a["adv"]) <= 0.03
    # value_estimate: the value targets, the tensordict untouched
    vt = acc.value_estimate(td)
    assert "target" not in td.keys() and rel(vt, ref.value_estimate(td)) <= 0.03
    torch.testing.assert_close(vt, b["target"])
    # time first: [T, B] with time_dim=0 gives the transposed results
    t = acc(td.clone().transpose(0, 1), time_dim=0)
    torch.testing.assert_close(t["target"].transpose(0, 1), b["target"])


def test_gae_bad_arguments_are_named():
    with pytest.raises(ValueError, match="differentiable must be False"):
        AcceleratedGAE(gamma=GAMMA, lmbda=LAM, differentiable=True)
    td = random_rollout(4)
    del td["next", "state_value"]
    with pytest.raises(ValueError, match=r"\('next', 'state_value'\).* is missing"):
        AcceleratedGAE(gamma=GAMMA, lmbda=LAM)(td)
    with pytest.raises(ValueError, match="gae must be a GaeDriver or a device spec"):
        AcceleratedGAE(gamma=GAMMA, lmbda=LAM, gae=None)


# -- prioritized sampler ------------------------------------------------------------------------
@pytest.fixture
def torchrl_trees(monkeypatch):
    segment_trees.install(monkeypatch)


def buffer(sampler, capacity, seed=5, batch=32):
    return TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=sampler,
                                  batch_size=batch, priority_key="td_error",
                                  generator=torch.Generator().manual_seed(seed))


def cartpole_td_errors(n):
    """TD errors of CartPole transitions (TorchRL's GymEnv, a linear critic)."""
    td = cartpole_rollouts(B=1, T=n)[0]
    with torch.no_grad():
        v = critic()(td.clone())["state_value"]
        nv = critic()(td["next"].clone())["state_value"]
    r, term = td["next", "reward"], td["next", "terminated"]
    return (r + GAMMA * nv * (~term) - v).abs()[:, 0]


@pytest.mark.parametrize("data", ["random", "cartpole"])
def test_sampler_follows_torchrl(torchrl_trees, data):
    """The same calls on TorchRL's sampler and this one: the same priorities stored, the same
    default priority, the same indices sampled (the same fractions from the buffer's
    generator) and the same importance weights, across a wrap of the storage."""
    cap = 96
    g = torch.Generator().manual_seed(7)
    errors = cartpole_td_errors(160) if data == "cartpole" else \
        torch.rand(160, generator=g) * 3
    ref = PrioritizedSampler(cap, alpha=0.6, beta=0.4)
    acc = AcceleratedPrioritizedSampler(cap, alpha=0.6, beta=0.4)
    rbs = [buffer(ref, cap), buffer(acc, cap)]
    matched = total = 0
    for step, lo in enumerate(range(0, 160, 40)):
        chunk = {"x": torch.arange(lo, lo + 40.0)}
        if step % 2:                                   # every other chunk with its TD errors
            chunk["td_error"] = errors[lo:lo + 40]
        samples = []
        for rb in rbs:
            rb.extend(TensorDict(chunk, [40]))
            samples.append(rb.sample())
        assert float(acc.default_priority) == pytest.approx(float(ref.default_priority))
        np.testing.assert_allclose(acc._stored, ref._sum_tree._v, rtol=1e-6)
        a, b = samples
        same = a["index"] == b["index"]
        matched, total = matched + int(same.sum()), total + same.numel()
        torch.testing.assert_close(b["priority_weight"][same], a["priority_weight"][same],
                                   rtol=1e-3, atol=1e-6)
        # the losses' |TD errors| of the batch become its priorities, in both
        for rb, s in zip(rbs, samples):
            s["td_error"] = errors[a["index"]] * 0.5
            rb.update_tensordict_priority(s)
    assert matched >= 0.98 * total                     # rounding of the priority format only
    # the accelerator holds what TorchRL's tree holds
    n = acc.driver.size
    np.testing.assert_allclose(acc.driver.read(np.arange(n)), ref._sum_tree._v[:n],
                               atol=2.0 ** -16)


def test_sampler_stores_the_drivers_td_priorities():
    """TorchRL's ``(p + eps) ** alpha`` is the replay driver's ``(|delta| + eps) ** alpha``."""
    errors = cartpole_td_errors(64).numpy().astype(np.float64)
    acc = AcceleratedPrioritizedSampler(64, alpha=0.7, beta=0.5, eps=1e-3)
    acc.update_priority(torch.arange(64), torch.as_tensor(errors))
    np.testing.assert_allclose(acc.driver.read(np.arange(64)),
                               td_priorities(errors, 0.7, 1e-3), atol=2.0 ** -16)
    assert acc.driver.total() == pytest.approx(td_priorities(errors, 0.7, 1e-3).sum(),
                                               rel=1e-4)


def test_sampler_device_prng_samples_in_proportion():
    """Without a generator the accelerator's PRNG draws: frequencies follow the priorities."""
    acc = AcceleratedPrioritizedSampler(8, alpha=1.0, beta=0.4)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), sampler=acc, batch_size=4096,
                                priority_key="td_error")
    prio = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 1.0, 4.0])
    rb.extend(TensorDict({"x": torch.arange(8.0), "td_error": prio}, [8]))
    counts = np.zeros(8)
    for _ in range(4):
        counts += np.bincount(rb.sample()["index"].numpy(), minlength=8)
    np.testing.assert_allclose(counts / counts.sum(), (prio / prio.sum()).numpy(), atol=0.01)


def test_sampler_state_alpha_and_errors(torchrl_trees):
    acc = AcceleratedPrioritizedSampler(32, alpha=0.6, beta=0.4)
    ref = PrioritizedSampler(32, alpha=0.6, beta=0.4)
    p = torch.linspace(0.1, 3.0, 20)
    for s in (acc, ref):
        s.update_priority(torch.arange(20), p)
        s.alpha = 0.9                                  # re-transforms what is stored
    np.testing.assert_allclose(acc._stored, ref._sum_tree._v, rtol=1e-5)
    np.testing.assert_allclose(acc.driver.read(np.arange(20)), ref._sum_tree._v[:20],
                               atol=2.0 ** -16)
    state = acc.state_dict()
    other = AcceleratedPrioritizedSampler(32, alpha=0.1, beta=0.1)
    other.load_state_dict(state)
    assert other.alpha == 0.9 and other.driver.size == 20
    np.testing.assert_allclose(other.driver.read(np.arange(20)), acc.driver.read(np.arange(20)))
    with pytest.raises(ValueError, match=r"max_capacity must be an integer in 1\.\.65536"):
        AcceleratedPrioritizedSampler(1 << 17, alpha=0.6, beta=0.4)
    with pytest.raises(ValueError, match="priority must be finite and >= 0"):
        acc.update_priority(torch.arange(2), torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="1-D storages only"):
        acc.update_priority(torch.zeros(2, 2, dtype=torch.long), 1.0)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        AcceleratedPrioritizedSampler(8, alpha=-1, beta=0.4)
