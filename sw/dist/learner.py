"""A local learner of Scalable Policy Optimization: local SGD on its own replay bank.

:class:`LearnerWorker` is SPO-DQN's learner (thesis Algorithm 7): it samples its bank, takes
one DQN step, writes the new priorities back (fused with the next sample, as
:mod:`sw.rl.dqn` does on the replay accelerator), ``H`` times in a row (:meth:`train`); then
the coordinator (:mod:`sw.dist.system`) collects the learners' :meth:`weights`, has the
weight server average them and hands the average back with :meth:`set_weights`, which is also
the only place the **target network** changes: it is set to the averaged weights after every
``F``-th averaging (thesis 5.2.1: the target must stay fixed while the learners run local
SGD). The learner itself never synchronises its target (``sync_period=0`` on the
accelerator, an infinite period for torch).

A learner owns one of:

* a learner device spec (``"golden"``, ``"pynq:..."``, ``"xrt:..."``): the learner accelerator
  behind :class:`~sw.learner.driver.LearnerDriver`; weights are exchanged as the raw
  fixed-point matrices of its weight format (:meth:`~sw.learner.driver.LearnerDriver.
  read_raw_weights`), so averaging is exact in integers (:func:`sw.dist.weights.mean_raw`);
* ``"cpu"``: the float32 torch network of :class:`sw.rl.dqn.TorchLearner` (same loss, plain
  SGD); weights are float32 matrices in the same ``(n_in + 1) x n_out`` layout.

The bank's importance-sampling weights weight the loss per sample on both (the accelerator's
``loss_weights``, torch's weighted squared errors), as in :mod:`sw.rl.dqn`.
"""

import numpy as np

__all__ = ["LearnerWorker", "call"]


def call(obj, method: str, *args, **kwargs):
    """``obj.method(*args)``, through Ray (and waited for) if ``obj`` is an actor handle."""
    fn = getattr(obj, method)
    if hasattr(fn, "remote"):
        import ray
        return ray.get(fn.remote(*args, **kwargs))
    return fn(*args, **kwargs)


class _AccelNet:
    """The learner accelerator: raw fixed-point weights."""

    def __init__(self, spec, module):
        from sw.learner.driver import LearnerDriver
        from sw.rl.devices import open_device

        dev, cfg, self.label = open_device(spec, "learner", module)
        self.driver = LearnerDriver(dev, cfg, sync_period=0, on_range="clip")
        cfg = self.driver.config
        if cfg.loss != "dqn":
            raise ValueError(f"the learner on {spec!r} has loss {cfg.loss!r}, not 'dqn'")
        self.sizes = tuple(cfg.sizes)
        self.weight_format = cfg.numerics.weight_format
        self.cycles = 0

    def load_float(self, ws, bs):
        self.driver.load_weights(ws, bs, target=True)

    def step(self, s, gamma, lr):
        d = self.driver.train_step(s["obs"], s["action"], s["reward"], s["next_obs"],
                                   s["done"], gamma=gamma, lr=lr, loss_weights=s["weights"],
                                   details=True)
        self.cycles += int(d.cycles)
        return float(d.weighted_loss), np.asarray(d.td_errors, np.float64)

    def get(self, target=False):
        return self.driver.read_raw_weights(target=target)

    def set(self, net, target):
        self.driver.load_raw_weights([np.asarray(m, np.int64) for m in net], target=target)


class _TorchNet:
    """float32 torch (:class:`sw.rl.dqn.TorchLearner`) with the target under our control."""

    def __init__(self, sizes):
        import torch

        from sw.rl.dqn import TorchLearner

        torch.set_num_threads(1)
        self._net = TorchLearner(list(sizes), 1 << 62)      # never syncs by itself
        self.label = "torch float32 (CPU)"
        self.sizes = tuple(sizes)
        self.weight_format = None
        self.cycles = 0

    def load_float(self, ws, bs):
        self._net.load(ws, bs)

    def step(self, s, gamma, lr):
        loss, td = self._net.step(s["obs"], s["action"], s["reward"], s["next_obs"],
                                  s["done"], gamma, lr, s["weights"])
        return float(loss), td

    def _linears(self, target):
        import torch
        return [m for m in (self._net.target if target else self._net.net)
                if isinstance(m, torch.nn.Linear)]

    def get(self, target=False):
        return [np.vstack([m.weight.detach().numpy().T, m.bias.detach().numpy()[None]])
                .astype(np.float32) for m in self._linears(target)]

    def set(self, net, target):
        import torch

        groups = [self._linears(False)] + ([self._linears(True)] if target else [])
        with torch.no_grad():
            for lins in groups:
                for m, w in zip(lins, net):
                    w = torch.as_tensor(np.asarray(w, np.float32))
                    m.weight.copy_(w[:-1].T)
                    m.bias.copy_(w[-1])


class LearnerWorker:
    """One SPO-DQN learner (module docstring).

    Parameters
    ----------
    index : int
        Learner number; it samples bank ``index``.
    spec : str
        ``"cpu"`` (torch) or a learner device spec.
    bank : ReplayBank or Ray actor handle
        Its replay bank.
    weight_server : WeightServer, Ray actor handle or None
        If it already holds averaged weights (a restarted learner), start from them (online
        and target); otherwise from ``initial``.
    init_seed : int
        Seed of the float network every learner starts from (:func:`sw.rl.dqn_common.init_weights`
        on ``sizes``: the same for every learner).
    sizes : tuple
        Layer sizes the torch learner builds; an accelerator must have these.
    batch, gamma, lr, beta : DQN hyper-parameters (local batch ``b``).
    module : str
        Shipped learner configuration the ``golden`` spec models.
    trace : bool
        Keep the ``tid`` of every sampled transition (:meth:`train` returns them).
    """

    def __init__(self, index, spec, *, bank, weight_server=None, init_seed=0, sizes,
                 batch=64, gamma=0.99, lr=0.01, beta=0.4, module="learner_cartpole_s4",
                 trace=False):
        self.index = int(index)
        self.spec = spec
        self._bank = bank
        self._b, self._gamma, self._lr, self._beta = int(batch), gamma, lr, beta
        self._trace = bool(trace)
        self._net = _TorchNet(sizes) if spec == "cpu" else _AccelNet(spec, module)
        if tuple(self._net.sizes) != tuple(sizes):
            raise ValueError(f"the learner on {spec!r} has layer sizes {self._net.sizes}, the "
                             f"environment and hidden size need {tuple(sizes)}")
        self.label = self._net.label
        self._pending = None
        self.steps = 0
        self.syncs = []                 # averaging rounds after which the target was set
        self.rounds = 0
        net = None
        if weight_server is not None:
            call(weight_server, "register", "learner", self.index)
            version, net = call(weight_server, "get_raw")
            net = net if version > 0 else None
        if net is not None:
            self._net.set(net, target=True)
        else:
            from sw.rl.dqn_common import init_weights
            self._net.load_float(*init_weights(list(sizes), np.random.default_rng(init_seed)))

    def info(self) -> dict:
        """Label, node, layer sizes and weight format (None for float)."""
        import socket
        return {"learner": self.index, "spec": self.spec, "label": self.label,
                "node": socket.gethostname(), "sizes": self._net.sizes,
                "weight_format": self._net.weight_format}

    def train(self, steps: int) -> dict:
        """``steps`` local SGD steps on the learner's bank (the ``H`` steps of a round).

        Returns ``losses`` (one per step), ``cycles`` (accelerator cycles so far) and, with
        ``trace``, ``tids`` (sampled transitions) and ``idx`` (their slots).
        """
        losses, tids, slots = [], [], []
        for _ in range(int(steps)):
            if self._pending is None:
                s = call(self._bank, "sample", self._b, self._beta)
            else:
                s = call(self._bank, "update_and_sample", *self._pending, self._b, self._beta)
            loss, td = self._net.step(s, self._gamma, self._lr)
            self._pending = (s["idx"], td)
            losses.append(loss)
            if self._trace:
                tids.append(s["tid"])
                slots.append(s["idx"])
            self.steps += 1
        out = {"learner": self.index, "losses": losses, "cycles": self._net.cycles,
               "steps": self.steps}
        if self._trace:
            out["tids"] = np.concatenate(tids) if tids else np.zeros(0, np.int64)
            out["idx"] = np.concatenate(slots) if slots else np.zeros(0, np.int64)
        return out

    def flush(self) -> None:
        """Write the last step's priorities (otherwise fused with the next sample)."""
        if self._pending is not None:
            call(self._bank, "update", *self._pending)
            self._pending = None

    def weights(self, target: bool = False) -> list:
        """The online (or target) network: raw fixed-point or float32 matrices."""
        return self._net.get(target=target)

    def set_weights(self, net, sync_target: bool = False) -> int:
        """Load averaged weights; with ``sync_target`` the target network too (the only
        place it changes). Returns the number of averaging rounds seen."""
        self.rounds += 1
        self._net.set(net, target=bool(sync_target))
        if sync_target:
            self.syncs.append(self.rounds)
        return self.rounds

    def counters(self) -> dict:
        """Local steps, averaging rounds, target syncs (rounds), accelerator cycles."""
        return {"steps": self.steps, "rounds": self.rounds, "syncs": list(self.syncs),
                "cycles": self._net.cycles}
