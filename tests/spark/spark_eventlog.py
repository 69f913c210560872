"""Helpers for the Spark tests: event rows written by hand and a small topology."""

from __future__ import annotations

import json

from rmptwin.model import Topology


def ev(t, node, role, kind, src="", seq=-1, gseq=-1, **detail):
    return (int(t), node, role, kind, src, int(seq), int(gseq), 64, json.dumps(detail) if detail else "{}")


def small_topology(**stripes) -> Topology:
    """s1 - s2 (region west / east); source h0 at s1; receivers a,b at s1, c at s2; customers."""
    hosts = [{"name": "h0", "role": "source", "switch": "s1"},
             {"name": "a", "role": "primary", "switch": "s1", "regions": ["west"]},
             {"name": "b", "role": "primary", "switch": "s1"},
             {"name": "c", "role": "primary", "switch": "s2", "regions": ["east"]},
             {"name": "x", "role": "customer", "switch": "s1", "regions": ["west"]},
             {"name": "y", "role": "customer", "switch": "s2", "regions": ["east"]}]
    for h in hosts:
        if h["name"] in stripes:
            h["stripes"] = stripes[h["name"]]
    return Topology.model_validate({
        "name": "small", "switches": ["s1", "s2"], "regions": {"west": ["s1"], "east": ["s2"]},
        "links": [{"a": "s1", "b": "s2", "delay_ms": 5}], "hosts": hosts})
