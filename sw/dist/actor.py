"""An actor of Scalable Policy Optimization / PAAL: a gymnasium vector environment and a policy.

:class:`EnvActor` follows SPO's Algorithm 6: it acts epsilon-greedily with a float copy of the
network, keeps transitions in a local buffer, pushes them to the replay banks in turn (bank
``index``, then the next, ...) and pulls the current weights from the weight server every
``pull_every`` vector steps. Inserting needs no lock on the actor's side: PAAL's asynchronous
insertion (the bank sorts out concurrency, :mod:`sw.dist.replay`).

Two ways to hand transitions over (:meth:`EnvActor.collect`):

* ``push=True`` (asynchronous mode): the actor sends each batch to its bank itself
  (``bank.insert.remote``) and only waits for its own inserts before returning;
* ``push=False`` (lockstep mode): the call returns the batch, and the coordinator passes its
  object reference to the bank in a fixed order, so that runs are reproducible.

The vector environment resets finished episodes in the same step (gymnasium's
``AutoresetMode.SAME_STEP``): the stored next observation of a finished episode is its final
observation, never the next episode's first. A restarted actor (Ray ``max_restarts``) asks the
weight server how often it started, and seeds its environments and ids from that, so its
transitions never repeat the ids of its earlier life.
"""

import numpy as np

from sw.rl.dqn_common import forward

from .learner import call
from .replay import transition_fields

__all__ = ["EnvActor", "forward"]

#: Bits of a transition id below the actor's incarnation (2**36 transitions per life).
_TID_BITS = 36


class EnvActor:
    """One actor (module docstring).

    Parameters
    ----------
    index : int
        Actor number.
    dqn : sw.rl.dqn.DQNConfig
        Environment id, epsilon schedule (over ``total_steps`` environment steps of all
        actors), ``reward_scale``.
    num_envs : int
        Environments of the vector environment.
    stride : int
        Environment steps all actors take together per vector step of this one (the
        epsilon schedule's clock): ``actors * num_envs``.
    banks : list
        The replay banks (objects or Ray actor handles).
    weight_server : WeightServer or Ray actor handle
    pull_every, push_every : int
        Vector steps between weight pulls and between pushes (asynchronous mode).
    seed : int
    """

    def __init__(self, index, *, dqn, num_envs, stride, banks, weight_server, pull_every=10,
                 push_every=16, seed=0):
        import gymnasium as gym

        self.index = int(index)
        self._dqn = dqn
        self._n = int(num_envs)
        self._stride = int(stride)
        self._banks = list(banks)
        self._ws = weight_server
        self._pull_every, self._push_every = int(pull_every), int(push_every)
        self.incarnation = int(call(weight_server, "register", "actor", self.index))
        seed = int(seed) + 7919 * self.incarnation
        self._rng = np.random.default_rng(seed)
        self._env = gym.make_vec(dqn.env_id, num_envs=self._n, vectorization_mode="sync",
                                 vector_kwargs={"autoreset_mode":
                                                gym.vector.AutoresetMode.SAME_STEP})
        self._n_act = int(self._env.single_action_space.n)
        self._obs, _ = self._env.reset(seed=seed)
        self._fields = transition_fields(self._env.single_observation_space.shape[0])
        self._next_tid = ((self.index + 1) << (_TID_BITS + 8)) | (self.incarnation << _TID_BITS)
        self._version, self._params = -1, None
        self._since_pull = self._pull_every
        self._cursor = self.index % len(self._banks)
        self._local = []
        self._returns = np.zeros(self._n)
        self._in_flight = []
        self.pulls = 0

    def info(self) -> dict:
        import socket
        return {"actor": self.index, "incarnation": self.incarnation,
                "node": socket.gethostname()}

    def _pull(self):
        version, params = call(self._ws, "get_float", self._version)
        if params is not None:
            self._version, self._params = version, params
            self.pulls += 1

    def _act(self, eps):
        explore = self._rng.random(self._n) < eps
        rand = self._rng.integers(self._n_act, size=self._n)
        if self._params is None or explore.all():
            return rand
        greedy = np.argmax(forward(*self._params, self._obs.astype(np.float64)), axis=1)
        return np.where(explore, rand, greedy)

    def _batch(self):
        rows = self._local
        self._local = []
        return {n: np.concatenate([r[n] for r in rows]).astype(dt)
                for n, (_, dt) in self._fields.items()}

    def _push(self):
        if not self._local:
            return
        bank = self._banks[self._cursor]
        self._cursor = (self._cursor + 1) % len(self._banks)
        batch = self._batch()
        fn = bank.insert
        if hasattr(fn, "remote"):
            self._in_flight.append(fn.remote(batch))
            if len(self._in_flight) > 2 * len(self._banks):      # bounded, never a lock
                import ray
                done, self._in_flight = ray.wait(self._in_flight, num_returns=1)
                ray.get(done)
        else:
            fn(batch)

    def _drain(self):
        if self._in_flight:
            import ray
            ray.get(self._in_flight)
            self._in_flight = []

    def collect(self, steps: int, step0: int = 0, push: bool = True):
        """Take ``steps`` vector steps (``steps * num_envs`` transitions).

        ``step0`` is the environment step count of all actors when the call starts (the
        epsilon schedule's clock). With ``push`` the transitions go to the banks in turn and
        ``(None, stats)`` is returned; without, ``(batch, stats)``. ``stats``: ``env_steps``,
        ``episodes`` (``(vector step within the call, return)``), ``version`` (weights used
        last), ``incarnation``.
        """
        episodes = []
        for t in range(int(steps)):
            if self._since_pull >= self._pull_every:
                self._pull()
                self._since_pull = 0
            a = self._act(self._dqn.epsilon(step0 + t * self._stride))
            o2, r, term, trunc, info = self._env.step(a)
            nxt = np.array(o2, np.float32)
            if "_final_obs" in info:
                for i in np.flatnonzero(info["_final_obs"]):
                    nxt[i] = info["final_obs"][i]
            tid = self._next_tid + np.arange(self._n, dtype=np.int64)
            self._next_tid += self._n
            self._local.append({"obs": self._obs, "action": a, "next_obs": nxt,
                                "reward": r * self._dqn.reward_scale, "done": term, "tid": tid})
            self._returns += r
            for i in np.flatnonzero(term | trunc):
                episodes.append((t, float(self._returns[i])))
                self._returns[i] = 0.0
            self._obs = o2
            self._since_pull += 1
            if push and len(self._local) >= self._push_every:
                self._push()
        stats = {"actor": self.index, "env_steps": int(steps) * self._n, "episodes": episodes,
                 "version": self._version, "incarnation": self.incarnation}
        if push:
            self._push()
            self._drain()
            return None, stats
        return self._batch() if self._local else None, stats
