"""Primary-primary exchange venues as pure sans-IO cores (no I/O, no clock, no environment).

``gateway`` (validate, log, number, multicast), ``venue`` (an execution venue: order and
execute every request), ``sequencer`` (the compare-and-swap sequencer, in memory or as a
proxy to an outside CAS memory), ``history`` (the history recorder), ``client`` (trading
load), ``orderbook`` (matching), ``wire`` (frames), ``stores`` (store interfaces and the
in-memory stores). Each core takes a small frozen config; stores and the CAS memory are
handed in by the driver (``rmptwin.factories.Adapters``). The real stores and etcd are in
``rmptwin.node``, the real-time benchmark harness in ``rmptwin.bench``; metrics in
``rmptwin.analysis.venue_metrics``, sweeps in ``rmptwin.studies.venue_sweeps``, the ``rmptwin venue``
commands in ``rmptwin.cli.venue_commands``.
"""
