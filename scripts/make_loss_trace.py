#!/usr/bin/env python3
"""Write a synthetic per-packet loss trace (0 delivered, 1 lost) from a Gilbert-Elliott chain.

    python3 scripts/make_loss_trace.py --packets 3000 --p-gb 0.01 --p-bg 0.3 --seed 7 > traces/ge-bursts.txt

Per packet: first the state moves (Good -> Bad with p_gb, Bad -> Good with p_bg), then the
packet is lost with loss_good or loss_bad; the chain starts in its stationary distribution.
This is the same per-packet model as rmptwin's ``gilbert_elliott`` loss, so `rmptwin trace fit`
on the output should give back about the parameters put in. Standard library only; the same
arguments always write the same file. 60 packets a line, with a comment header.
"""

import argparse
import random


def trace(packets: int, p_gb: float, p_bg: float, loss_good: float, loss_bad: float, seed: int) -> list[int]:
    rng = random.Random(seed)
    bad = rng.random() < p_gb / (p_gb + p_bg)
    out = []
    for _ in range(packets):
        bad = (rng.random() >= p_bg) if bad else (rng.random() < p_gb)
        out.append(int(rng.random() < (loss_bad if bad else loss_good)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=3000)
    ap.add_argument("--p-gb", type=float, default=0.01)
    ap.add_argument("--p-bg", type=float, default=0.3)
    ap.add_argument("--loss-good", type=float, default=0.0)
    ap.add_argument("--loss-bad", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    bits = trace(a.packets, a.p_gb, a.p_bg, a.loss_good, a.loss_bad, a.seed)
    print(f"# synthetic Gilbert-Elliott loss trace: {a.packets} packets, p_gb {a.p_gb}, p_bg {a.p_bg}, "
          f"loss_good {a.loss_good}, loss_bad {a.loss_bad}, seed {a.seed}")
    print(f"# written by: python3 scripts/make_loss_trace.py --packets {a.packets} --p-gb {a.p_gb} "
          f"--p-bg {a.p_bg} --loss-good {a.loss_good} --loss-bad {a.loss_bad} --seed {a.seed}")
    print("# one character per packet offered to the link: 0 delivered, 1 lost")
    for i in range(0, len(bits), 60):
        print("".join(map(str, bits[i:i + 60])))


if __name__ == "__main__":
    main()
