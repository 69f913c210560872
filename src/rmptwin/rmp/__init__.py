"""RMP cores (seed: rmp-internet-stock-market.txt sections 2, 4, 5), pure sans-IO state machines.

Where each seed concept lives:

- token ring (R_P members, token passing, acks, stability): ``token_ring``; the R_P host: ``primary``
- secondary ring (R_S and their R_P, secondary token): ``secondary_ring``; the R_S host: ``secondary``
- striping (which stripe a symbol, host, customer or MoldUDP64 session is on): ``rmptwin.core.striping``
- remulticast into regions as MoldUDP64: ``remulticast`` (frames: ``moldudp64``)
- repair (gaps, re-requests, the retransmit server's logic): ``repair``; ``customer``, ``retransmit``
- sources: ``source``; ring reformation: ``reformation``; failure reports: ``failure_report``
- stream reception shared by R_P and R_S: ``receiver``, ``receiver_host``; NACK reduction: ``nack_reduction``
- timing (tau_t formula, ``Timing``): ``rmptwin.core.timing``; the core base class and timers: ``corebase``
- wire frames: ``wire``; security (seed 6, 7.1: sealed sources, MACed control, regional keys): ``seal``

Group naming and addressing are in ``rmptwin.core.groups``; spec -> config translation in
``rmptwin.factories.rmp``.
"""
