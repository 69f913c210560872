"""`rmptwin trace fit`: the Bernoulli and Gilbert-Elliott parameters that fit a per-packet loss
trace, with each model's log-likelihood, so a researcher can see what a model keeps of the trace.

Estimators (maximum likelihood, i.e. the standard counting estimators), for a trace
x_1..x_n of 0 (delivered) and 1 (lost):

- Bernoulli: p = (number of 1s) / n.
- Gilbert (Gilbert-Elliott with loss_good 0 and loss_bad 1, the form whose state is the
  trace itself: Bad = lost): the transition counts of the observed two-state Markov chain,
      p_gb = #(0 followed by 1) / #(0 followed by anything)
      p_bg = #(1 followed by 0) / #(1 followed by anything)
  so 1 / p_bg is the mean loss-burst length and 1 / p_gb the mean run of deliveries.
  Stationary loss p_gb / (p_gb + p_bg).

Log-likelihoods (natural log, per packet): Bernoulli sum of log p or log(1 - p); Gilbert
log P(x_1) (stationary) + sum over transitions of log P(x_t | x_{t-1}). A Gilbert fit well
above the Bernoulli one says the losses come in bursts. A full four-parameter
Gilbert-Elliott fit (hidden state, Baum-Welch) is not done here.

An interval trace (``start_ms end_ms``) has no packets to count: its figures are the share
of time in loss and the interval lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Fit:
    packets: int
    lost: int
    bernoulli_p: float
    p_gb: float | None
    p_bg: float | None
    bursts: int
    mean_burst: float
    max_burst: int
    loglik_bernoulli: float
    loglik_gilbert: float | None

    @property
    def gilbert_mean(self) -> float | None:
        if self.p_gb is None or self.p_bg is None or self.p_gb + self.p_bg == 0:
            return None
        return self.p_gb / (self.p_gb + self.p_bg)


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def fit(bits: bytes | str) -> Fit:
    """Fit a per-packet trace (a str of '0'/'1' or bytes of 0/1)."""
    x = [1 if c in ("1", 1) else 0 for c in bits]
    n, lost = len(x), sum(x)
    p = lost / n if n else 0.0
    ll_b = sum(_log(p) if b else _log(1 - p) for b in x) if n else 0.0
    n01 = n0 = n10 = n1 = 0
    for a, b in zip(x, x[1:]):
        if a:
            n1 += 1
            n10 += not b
        else:
            n0 += 1
            n01 += b
    p_gb = n01 / n0 if n0 else None
    p_bg = n10 / n1 if n1 else None
    runs, cur = [], 0
    for b in x:
        if b:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    if cur:
        runs.append(cur)
    ll_g = None
    if p_gb is not None and p_bg is not None and p_gb + p_bg > 0:
        pi_bad = p_gb / (p_gb + p_bg)
        ll_g = (_log(pi_bad) if x[0] else _log(1 - pi_bad))
        ll_g += n01 * _log(p_gb) + (n0 - n01) * _log(1 - p_gb) + n10 * _log(p_bg) + (n1 - n10) * _log(1 - p_bg)
    return Fit(packets=n, lost=lost, bernoulli_p=p, p_gb=p_gb, p_bg=p_bg, bursts=len(runs),
               mean_burst=sum(runs) / len(runs) if runs else 0.0, max_burst=max(runs, default=0),
               loglik_bernoulli=ll_b, loglik_gilbert=ll_g)


def report_lines(f: Fit) -> list[str]:
    """What `rmptwin trace fit` prints, one figure a line, with YAML to paste."""
    out = [f"packets {f.packets}, lost {f.lost} ({100 * f.bernoulli_p:.3g} %), {f.bursts} loss bursts "
           f"(mean {f.mean_burst:.3g}, longest {f.max_burst} packets)",
           f"bernoulli:       p = {f.bernoulli_p:.6g}   log-likelihood {f.loglik_bernoulli:.6g}",
           f"  loss: {{model: bernoulli, p: {f.bernoulli_p:.6g}}}"]
    if f.loglik_gilbert is None:
        out.append("gilbert_elliott: not identifiable (the trace never changes state: all 0 or all 1)")
    else:
        # a Gilbert-Elliott log-likelihood comes with both transition probabilities, summing above 0
        assert f.p_bg is not None and f.gilbert_mean is not None
        out += [f"gilbert_elliott: p_gb = {f.p_gb:.6g}, p_bg = {f.p_bg:.6g}, loss_good 0, loss_bad 1 "
                f"(stationary loss {100 * f.gilbert_mean:.3g} %, mean burst {1 / f.p_bg:.3g} packets)   "
                f"log-likelihood {f.loglik_gilbert:.6g}",
                f"  loss: {{model: gilbert_elliott, p_gb: {f.p_gb:.6g}, p_bg: {f.p_bg:.6g}}}",
                f"log-likelihood ratio (gilbert - bernoulli): {f.loglik_gilbert - f.loglik_bernoulli:.4g} "
                "(large: the losses come in bursts)"]
    return out


def interval_lines(intervals_ms: list[list[float]]) -> list[str]:
    spans = [b - a for a, b in intervals_ms]
    end = max(b for _, b in intervals_ms)
    return [f"{len(spans)} loss intervals up to {end:g} ms: {100 * sum(spans) / end:.3g} % of the time in loss, "
            f"mean interval {sum(spans) / len(spans):.4g} ms, longest {max(spans):.4g} ms",
            "per-packet models (bernoulli, gilbert_elliott) need a per-packet trace (0/1 per packet)"]
