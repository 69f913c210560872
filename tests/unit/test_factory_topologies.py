"""The RMP factories answer each topology's questions from that topology alone: building
cores for two topologies in one process (a sweep, a test session, a twin comparison) gives
each the configuration it would get alone, and the factories keep no topology alive."""

from __future__ import annotations

import gc
import random
import weakref
from pathlib import Path

from rmptwin.factories import rmp
from rmptwin.model import load_experiment

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _customer_configs(loaded) -> dict:
    return {h.name: rmp.customer_config(h, loaded) for h in loaded.topology.hosts_with_role("customer")}


def _expected_remulticasters(loaded, regions, stripe) -> list[str]:
    """By hand: every primary or secondary in topology order sharing a region and serving the stripe."""
    return [h.name for h in loaded.topology.hosts if h.role in ("primary", "secondary")
            and set(h.regions) & set(regions) and (h.stripes is None or stripe in h.stripes)]


def test_two_topologies_in_one_process_get_independent_configs():
    alone = {name: _customer_configs(load_experiment(EXPERIMENTS / f"{name}.yaml"))
             for name in ("quickstart", "line3")}
    quick, line = (load_experiment(EXPERIMENTS / f"{n}.yaml") for n in ("quickstart", "line3"))
    for _ in range(2):                      # interleaved: each call switches topology
        for q, ln in zip(quick.topology.hosts_with_role("customer"), line.topology.hosts_with_role("customer")):
            assert rmp.customer_config(q, quick) == alone["quickstart"][q.name]
            assert rmp.customer_config(ln, line) == alone["line3"][ln.name]
    for loaded in (quick, line):
        for c in loaded.topology.hosts_with_role("customer"):
            for k in rmp.customer_stripes(c, loaded):
                assert rmp.remulticasters(loaded, c.regions, k) == _expected_remulticasters(loaded, c.regions, k)


def test_a_copy_with_other_hosts_is_answered_from_its_own_hosts():
    loaded = load_experiment(EXPERIMENTS / "quickstart.yaml")
    topo = loaded.topology
    customer = topo.hosts_with_role("customer")[0]
    before = rmp.remulticasters(loaded, customer.regions, 0)
    assert before
    # the same number of hosts, but the first R_T serving this customer is now a plain customer
    gone = next(h for h in topo.hosts if h.name == before[0])
    hosts = [customer.model_copy(update={"name": gone.name}) if h is gone else h for h in topo.hosts]
    changed = loaded.model_copy(update={"topology": topo.model_copy(update={"hosts": hosts})})
    assert rmp.remulticasters(changed, customer.regions, 0) == before[1:]
    assert rmp.remulticasters(loaded, customer.regions, 0) == before


def test_factories_keep_no_topology_alive():
    loaded = load_experiment(EXPERIMENTS / "line3.yaml")
    for h in loaded.topology.hosts_with_role("customer"):
        rmp.build_customer(h, loaded, random.Random(1))
    ref = weakref.ref(loaded.topology)
    del loaded, h
    gc.collect()
    assert ref() is None, "a module keeps the last topology (and its hosts) alive"


def test_hosts_with_roles_keeps_topology_order():
    topo = load_experiment(EXPERIMENTS / "quickstart.yaml").topology
    want = [h.name for h in topo.hosts if h.role in ("secondary", "primary")]
    assert [h.name for h in topo.hosts_with_role("primary", "secondary")] == want
    assert [h.name for h in topo.hosts_with_role("secondary", "primary")] == want
    assert topo.hosts_with_role("no-such-role") == [] and topo.hosts_with_role() == []
