"""The distributed trading floor (seed 7.3), built on the RMP ring's existing cores.

Participants enter buy, sell and stop orders through their S_P (``participant``); every
participant receives the whole agreed sequence and derives the trades itself
(``state.FloorState`` with a pluggable ``rules`` module). The R_P holding the token is the
arbiter (``arbiter``): it reports each trade tentative at once and confirmed once the
report is stable, the next time it holds the token; reports travel in the ring, so every
participant learns them in order. ``messages`` is the payload format, ``workload`` the
order schedule, ``floor_node`` the plumbing that puts a receiver and a source in one core.
"""
