"""Per-packet loss processes, shared by the simulator and the user-space link impairment.

Each process owns its state (the Gilbert-Elliott channel state) and draws from the
``random.Random`` it is given, so a seeded link drops the same packets every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .spec import Bernoulli, GilbertElliott


@dataclass
class BernoulliLoss:
    p: float

    def drop(self, rng: random.Random) -> bool:
        return self.p > 0.0 and rng.random() < self.p


@dataclass
class GilbertElliottLoss:
    p_gb: float
    p_bg: float
    loss_good: float
    loss_bad: float
    bad: bool = False

    def drop(self, rng: random.Random) -> bool:
        # Transition first, then lose with the new state's probability (Gilbert-Elliott per packet).
        if self.bad:
            if rng.random() < self.p_bg:
                self.bad = False
        elif rng.random() < self.p_gb:
            self.bad = True
        p = self.loss_bad if self.bad else self.loss_good
        return p > 0.0 and rng.random() < p


LossProcess = BernoulliLoss | GilbertElliottLoss


def make_loss(model: Bernoulli | GilbertElliott) -> LossProcess:
    if isinstance(model, GilbertElliott):
        return GilbertElliottLoss(model.p_gb, model.p_bg, model.loss_good, model.loss_bad)
    return BernoulliLoss(model.p)
