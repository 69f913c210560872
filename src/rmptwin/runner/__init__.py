"""An experiment run on a backend (``experiment.run_experiment``: simulator or emulated
network, then its summary) and the re-run of an earlier run (``rerun``)."""
