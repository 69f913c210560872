"""Planning an emulated run: how much CPU its work asks of this host, and the time dilation
factor that gives it enough (``time_dilation: auto``, ``rmptwin plan``).

- ``demand``: a run's work from its link counts (datagrams each node handled, frames the
  switch links carried), the simulator's as the prediction, an emulated run's as the measure;
- ``calibration``: this host's cost of that work (CPU per datagram per role, per switch-link
  frame, and per wall second idle), fitted from emulated runs and cached with the host's identity;
- ``plan``: CPUs busy at a factor N, the smallest N on time, the wall time it takes.
"""
