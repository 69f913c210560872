"""Fault campaigns (`rmptwin chaos`): random nemesis schedules, every run checked by
``rmptwin.checkers``, violating schedules shrunk to a minimal reproduction.

    schedule   draw a fault schedule (documented distributions, majority bound)
    campaign   run the schedules (simulated: Spark tasks through the sweeps' path), collect rows
    shrink     delta debugging over a violating schedule's fault list
    report     chaos.html
"""
