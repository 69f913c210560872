"""The cost of sealing (seed 6 and 7.1): seal and open per message.

Rows: for 64 B and 1,000 B payloads, the median microseconds per message (over batches)
and the messages per second of a source sealing (``Sealer.seal_source``), an R_T opening
(``open_source``: it does so twice, at receipt and at release), a regional re-encryption
(``seal_region``), a customer opening (``open_regional``), and the control MAC, beside the
unsealed codec (``wire.encode`` + uncached decode of the DATA frame) as the baseline.
What a host pays per message is the sum of its rows: a source one seal, an R_T two opens
and one regional seal per region, a customer one open.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from typing import Any

from rmptwin.rmp import wire
from rmptwin.rmp.seal import KEY_BYTES, KeySet, Sealer

BATCHES = 5


def _keys() -> KeySet:
    key = secrets.token_bytes
    return KeySet(sources={"src1": key(KEY_BYTES)}, regions={"europe": key(KEY_BYTES)},
                  retransmit={"europe": key(KEY_BYTES)}, control=key(KEY_BYTES))


def _median_us(fn: Callable[[int], object], n: int) -> float:
    """Median over BATCHES batches of n calls fn(i), in microseconds of this process's CPU
    time per call (one thread, CPU-bound: on a shared machine wall time counts the waits)."""
    per_call = []
    for _ in range(BATCHES):
        t0 = time.process_time()
        for i in range(n):
            fn(i)
        per_call.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(per_call)


def _operations(size: int) -> dict[str, Callable[[int], object]]:
    sealer = Sealer(_keys())
    payload = secrets.token_bytes(size)
    sealed = [sealer.seal_source("src1", 0, i, payload) for i in range(1024)]
    regional = [sealer.seal_region("europe", 0, i, payload) for i in range(1024)]
    return {
        "unsealed codec (DATA encode + decode)": lambda i: wire._decode(wire.encode(
            wire.Data(0, "src1", i, 1, payload)), 0),
        "seal_source (source)": lambda i: sealer.seal_source("src1", 0, i, payload),
        "open_source (R_T, at receipt and again at release)": lambda i: sealer.open_source(
            "src1", 0, i % 1024, sealed[i % 1024]),
        "seal_region (R_T remulticast, per region)": lambda i: sealer.seal_region("europe", 0, i, payload),
        "open_regional (customer)": lambda i: sealer.open_regional(0, i % 1024, regional[i % 1024]),
    }


def run(quick: bool) -> list[dict[str, Any]]:
    n = 2_000 if quick else 20_000
    rows = []
    for size in (64, 1000):
        ops = _operations(size)
        baseline = None
        for name, fn in ops.items():
            us = _median_us(fn, n)
            baseline = us if baseline is None else baseline
            rows.append({
                "metric": f"{name}, {size} B payload", "value": us, "unit": "us/msg", "better": "lower",
                "conditions": f"CPU time, median of {BATCHES} batches of {n:,}; ChaCha20-Poly1305 (cryptography)",
                "note": f"{1e6 / us:,.0f} msg/s; {us / baseline:.1f}x the unsealed codec"})
    sealer = Sealer(_keys())
    ack = wire.encode(wire.Ack(0, 1, 7, 100, 123, "rp1", "rp2", (("src1", 1),)))
    us = _median_us(lambda i: sealer.open_control(sealer.mac_control(ack)), n)
    rows.append({"metric": "control frame MAC + check (HMAC-SHA256, 1-message ACK)", "value": us, "unit": "us/frame",
                 "better": "lower", "conditions": f"CPU time, median of {BATCHES} batches of {n:,}",
                 "note": f"{1e6 / us:,.0f} frames/s"})
    return rows
