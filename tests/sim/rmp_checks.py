"""Independent checks of RMP runs from the raw event table (not the simulator's summary):
order agreement across receivers and nothing lost. Shared by the tests/sim/test_rmp_* files."""

from __future__ import annotations

import json

import pandas as pd

RT_ROLES = ("primary", "secondary")


def stripe_of(detail: str) -> int:
    return int(json.loads(detail).get("stripe", 0)) if detail and detail != "{}" else 0


def frame(result) -> pd.DataFrame:
    df = result.events.to_pandas()
    df["stripe"] = [stripe_of(d) for d in df.detail]
    return df


def crashed_at_end(df: pd.DataFrame) -> set[str]:
    life = df[df.kind.isin(["crash", "recover"])].sort_values("t_ns", kind="stable")
    return {n for n, g in life.groupby("node") if g.iloc[-1].kind == "crash"}


def restarts(df: pd.DataFrame) -> dict[tuple[str, int | None], int]:
    """(node, stripe) -> time of its last restart; stripe None: the whole host restarted."""
    out: dict[tuple[str, int | None], int] = {}
    r = df[df.kind == "recover"]
    for n, t, d in zip(r.node, r.t_ns, r.detail):
        key = (n, json.loads(d)["stripe"]) if '"stripe"' in d else (n, None)
        out[key] = max(out.get(key, -1), int(t))
    return out


def delivery_maps(df: pd.DataFrame, skip: set[str] = frozenset()) -> dict[tuple[str, int], dict[int, tuple[str, int]]]:
    """(receiver, stripe) -> {gseq: (src, src_seq)}; a receiver placing two messages at one
    gseq fails the test right here."""
    maps: dict[tuple[str, int], dict[int, tuple[str, int]]] = {}
    d = df[(df.kind == "deliver") & df.role.isin(RT_ROLES) & ~df.node.isin(skip)]
    # a restarted host (or a receiver that resynchronised one stripe) starts over: only
    # what it placed after its last restart counts
    rec = restarts(df)
    if rec:
        d = d[[t >= rec.get((n, k), rec.get((n, None), -1)) for n, k, t in zip(d.node, d.stripe, d.t_ns)]]
    for node, stripe, g, s, q in zip(d.node, d.stripe, d.gseq, d.src, d.src_seq):
        m = maps.setdefault((node, stripe), {})
        assert m.setdefault(int(g), (s, int(q))) == (s, int(q)), f"{node} placed two messages at gseq {g}"
    return maps


def assert_agreement_and_no_loss(df: pd.DataFrame, receivers: dict[str, list[int]], *, all_acked: bool = True,
                                 skip: set[str] = frozenset()) -> int:
    """Every operable receiver (name -> its stripes) placed the same messages at the same
    gseqs, 1..N without a hole, each message once; every message a source published (or, with
    ``all_acked=False``, every acknowledged one) is in it. Returns the messages checked."""
    skip = set(skip) | crashed_at_end(df)
    maps = delivery_maps(df, skip)
    sent = df[df.kind == "send"]
    acked = df[df.kind == "src_acked"]
    total = 0
    for stripe in sorted({k for ks in receivers.values() for k in ks}):
        names = [n for n, ks in receivers.items() if stripe in ks and n not in skip]
        assert names, f"no operable receiver on stripe {stripe}"
        rs = restarts(df)
        restarted = {n for (n, k) in rs if k in (None, stripe)}
        end = int(df.t_ns.max())
        whole = [n for n in names if n not in restarted] or names
        names = whole + [n for n in names if n not in whole]
        ref = maps.get((names[0], stripe), {})
        for n in names[1:]:
            mine = maps.get((n, stripe), {})
            if n in restarted:
                # a restarted (or resynchronised) receiver agrees on everything it placed and
                # owes what follows its first placement, unless it restarted in the last
                # second of the run and is still catching up
                assert all(ref.get(g) == m for g, m in mine.items()), f"stripe {stripe}: restarted {n} disagrees"
                late = end - max(rs.get((n, stripe), -1), rs.get((n, None), -1)) < 1e9
                if mine and not late:
                    ref_n = {g: m for g, m in ref.items() if g >= min(mine)}
                    assert mine == ref_n, f"stripe {stripe}: restarted {n} misses messages"
                continue
            assert mine == ref, f"stripe {stripe}: {n} and {names[0]} disagree " \
                                f"({len(mine)} vs {len(ref)} messages; first difference at gseq " \
                                f"{min(g for g in set(mine) | set(ref) if mine.get(g) != ref.get(g))})"
        assert sorted(ref) == list(range(1, len(ref) + 1)), f"stripe {stripe}: gseqs have holes"
        msgs = list(ref.values())
        assert len(set(msgs)) == len(msgs), f"stripe {stripe}: a message was placed twice"
        pool = sent if all_acked else acked
        want = {(s, int(q)) for s, q, k in zip(pool.src, pool.src_seq, pool.stripe) if k == stripe}
        missing = want - set(msgs)
        assert not missing, f"stripe {stripe}: {len(missing)} messages never placed, e.g. {sorted(missing)[:3]}"
        total += len(msgs)
    return total
