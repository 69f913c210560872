"""NACK reduction request sets (seed section 5.2).

If token t is sent by receiver r of an m-member ring, the receivers in

    S_{i,t} = { (r + i + 1 + j k_p) mod m  :  0 <= j <= floor((m - i - 1) / k_p) },  i = 0 .. k_p - 1

may request the message acknowledged by t once they have received token t + i. Every
receiver falls in exactly one set, the next token site is in S_0, and every receiver can
ask within k_p token passes.
"""

from __future__ import annotations


def request_sets(r: int, m: int, k_p: int) -> list[frozenset[int]]:
    """The seed's S_{i,t} for i = 0 .. k_p - 1, ring positions 0 .. m - 1."""
    return [
        frozenset((r + i + 1 + j * k_p) % m for j in range((m - i - 1) // k_p + 1))
        for i in range(k_p)
    ]


def request_slot(position: int, r: int, m: int, k_p: int) -> int:
    """i such that ``position`` is in S_{i,t} for a token sent by ``r``: the position may
    request once it holds token t + i. Equal to ((position - r - 1) mod m) mod k_p whenever
    that is a set index, which the formula guarantees for every position."""
    return ((position - r - 1) % m) % k_p
