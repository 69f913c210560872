"""A topology: switches, regions, links and hosts, checked for dangling references."""

from __future__ import annotations

import heapq
from typing import Any

from pydantic import Field, model_validator

from rmptwin.model._base import _Model
from rmptwin.model.hosts import CustomerHost, HostSpec, ParticipantHost, PrimaryHost, RetransmitHost, SecondaryHost
from rmptwin.model.links import LinkSpec


class Topology(_Model):
    name: str
    switches: list[str] = Field(min_length=1)
    regions: dict[str, list[str]] = Field(default_factory=dict, description="region -> its switches")
    links: list[LinkSpec] = Field(default_factory=list)
    hosts: list[HostSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> Topology:  # noqa: C901 - one check per reference a topology makes, each one line
        sw = set(self.switches)
        if len(sw) != len(self.switches):
            raise ValueError("switch names must be unique")
        for region, members in self.regions.items():
            for s in members:
                if s not in sw:
                    raise ValueError(f"region {region!r} names unknown switch {s!r}")
        seen_links = set()
        for link in self.links:
            for end in (link.a, link.b):
                if end not in sw:
                    raise ValueError(f"link {link.name} names unknown switch {end!r}")
            key = frozenset((link.a, link.b))
            if link.a == link.b or key in seen_links:
                raise ValueError(f"link {link.name} is a self-loop or a duplicate")
            seen_links.add(key)
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("host names must be unique")
        if set(names) & sw:
            raise ValueError("a host and a switch share a name")
        by_name = {h.name: h for h in self.hosts}
        for h in self.hosts:
            if h.switch not in sw:
                raise ValueError(f"host {h.name} is attached to unknown switch {h.switch!r}")
            for r in getattr(h, "regions", []):
                if r not in self.regions:
                    raise ValueError(f"host {h.name} names unknown region {r!r}")
            if isinstance(h, SecondaryHost) and not isinstance(by_name.get(h.primary), PrimaryHost):
                raise ValueError(f"secondary {h.name}: primary {h.primary!r} is not a primary host")
            if isinstance(h, ParticipantHost) and h.primary is not None \
                    and not isinstance(by_name.get(h.primary), PrimaryHost):
                primaries = ", ".join(p.name for p in self.hosts if isinstance(p, PrimaryHost)) or "none"
                raise ValueError(f"participant {h.name}: primary {h.primary!r} is not a primary host "
                                 f"(the primaries: {primaries})")
            if isinstance(h, CustomerHost) and h.retransmit is not None:
                if not isinstance(by_name.get(h.retransmit), RetransmitHost):
                    raise ValueError(f"customer {h.name}: retransmit {h.retransmit!r} is not a retransmit host")
        if not _connected(self.switches, self.links):
            raise ValueError("the switches do not form one connected network")
        return self

    def hosts_with_role(self, *roles: str) -> list[Any]:
        """The hosts of these roles, in topology order. Factories ask this per host, and
        10,000 customers would otherwise scan every host each: the positions per role are
        indexed once per topology, kept on the object itself (as functools.cached_property
        does, outside the fields) and rebuilt if its hosts list is not the one indexed."""
        index = self.__dict__.get("_role_positions")
        if index is None or index[0] is not self.hosts or index[1] != len(self.hosts):
            positions: dict[str, list[int]] = {}
            for i, h in enumerate(self.hosts):
                positions.setdefault(h.role, []).append(i)
            index = self.__dict__["_role_positions"] = (self.hosts, len(self.hosts), positions)
        at = [index[2].get(role, []) for role in roles]
        return [self.hosts[i] for i in (at[0] if len(at) == 1 else heapq.merge(*at))]

    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def link(self, a: str, b: str) -> LinkSpec:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        raise KeyError(f"{a}-{b}")


def _connected(switches: list[str], links: list[LinkSpec]) -> bool:
    adj: dict[str, set[str]] = {s: set() for s in switches}
    for link in links:
        adj[link.a].add(link.b)
        adj[link.b].add(link.a)
    seen, todo = {switches[0]}, [switches[0]]
    while todo:
        for n in adj[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    return len(seen) == len(switches)
