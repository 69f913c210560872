"""The ticker workload: when each source publishes what (pure; shared by simulator and runtime).

``schedule(loaded, seed)`` gives every publication ``(t_ns, source, stripe, payload)`` in
time order. Arrivals are Poisson (exponential gaps) or constant at ``rate_per_source``
from ``start_s`` for ``duration_s``; constant sources are phase-staggered so they do not
all publish at the same instant. Each payload is a ``trade_report.TradeReport`` for symbol i
(on the stripe ``core.striping`` gives it, and only on stripes the source serves), with a
per-symbol random-walk price, padded to ``message_bytes``. Each source draws from its own RNG seeded
by the run seed and its name, so adding a source does not change another's stream.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from rmptwin.core.striping import host_stripes, symbol_stripe, symbols_on
from rmptwin.core.trade_report import TradeReport, symbol_name
from rmptwin.model import LoadedExperiment, SourceHost
from rmptwin.model.queries import workload_sources


@dataclass(frozen=True, slots=True)
class Publish:
    t_ns: int
    source: str
    stripe: int
    payload: bytes


def _arrivals(rng: random.Random, rate: float, start_ns: int, end_ns: int, arrival: str, phase: float) -> Iterator[int]:
    if rate <= 0:
        return
    gap_ns = 1e9 / rate
    if arrival == "constant":
        t = start_ns + phase * gap_ns
        while t < end_ns:
            yield int(t)
            t += gap_ns
    else:
        t = start_ns + rng.expovariate(rate) * 1e9
        while t < end_ns:
            yield int(t)
            t += rng.expovariate(rate) * 1e9


def source_schedule(loaded: LoadedExperiment,
                    source: SourceHost, seed: int, index: int = 0, count: int = 1) -> list[Publish]:
    """One source's publications; ``index``/``count`` stagger constant-rate sources."""
    wl = loaded.experiment.workload
    symbols = symbols_on(host_stripes(source.stripes, wl.stripes), wl.symbols, wl.stripes)
    if not symbols:
        return []
    rng = random.Random(f"{seed}:workload:{source.name}")
    start = round(wl.start_s * 1e9)
    end = start + round(wl.duration_s * 1e9)
    price = {i: 1_000_000 + 10_000 * i for i in symbols}  # 100.00 + i, in 1/10000 units
    venue = source.name[:4].upper()
    out: list[Publish] = []
    for t in _arrivals(rng, wl.rate_per_source, start, end, wl.arrival, index / max(count, 1)):
        i = symbols[rng.randrange(len(symbols))]
        price[i] = max(100, price[i] + 100 * rng.randint(-5, 5))  # walk in cents, never below 0.01
        size = 100 * rng.randint(1, 10)
        report = TradeReport(symbol_name(i), price[i], size, venue, t)
        out.append(Publish(t, source.name, symbol_stripe(i, wl.stripes), report.encode(pad_to=wl.message_bytes)))
    return out


def schedule(loaded: LoadedExperiment, seed: int | None = None) -> list[Publish]:
    """Every source's publications, in (time, source) order."""
    seed = loaded.experiment.seed if seed is None else seed
    sources = workload_sources(loaded)
    out: list[Publish] = []
    for i, src in enumerate(sources):
        out.extend(source_schedule(loaded, src, seed, i, len(sources)))
    out.sort(key=lambda p: (p.t_ns, p.source))
    return out
