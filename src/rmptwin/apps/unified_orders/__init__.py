"""Unified orders (seed 7.2): traders, the network-owned portals S_P that admit their offers into
the RMP ring, and exchanges that execute the ring's sequence.

Pure sans-IO cores (``rmptwin.core.sansio.Core``): ``trader.TraderCore``, ``portal.PortalCore`` (an
``admission.Admission`` in front of an ``rmp.source.SourceCore``), ``broker.BrokerCore`` (a
secondary source S_S in front of an S_P) and ``exchange.ExchangeCore``.
``offers`` is the offer record and its wire format; ``plan`` the seeded decision schedule.
``portal.OrderEntry`` (credentials, funds, holdings, rate limit; then hand on) has no RMP in it,
so another application's order-entry point can reuse it.
"""
