"""Primary-primary exchange venues as pure sans-IO cores (no I/O, no clock, no environment).

``gateway`` (validate, log, number, multicast), ``venue`` (an execution venue: order and
execute every request), ``sequencer`` (the compare-and-swap sequencer, in memory or as a
proxy to an outside CAS memory), ``history`` (the history recorder), ``client`` (trading
load), ``orderbook`` (matching), ``wire`` (frames), ``stores`` (store interfaces and the
in-memory stores). Each core takes a small frozen config; stores and the CAS memory are
handed in by the driver (``rmptwin.factories.Adapters``). The real stores, etcd and the
real-time harness are in ``rmptwin.runtime``; metrics, sweeps and the ``rmptwin venue``
commands in ``rmptwin.analysis``.
"""
