"""The run and sweep directories' one owner: ``run.RunDir`` writes and reads every file of a
run, ``sweep.SweepDir`` every file of a sweep; ``provenance`` what a run records about the
machine and the code it ran on. No other module spells a path inside them."""
