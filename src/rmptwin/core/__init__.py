"""What every core shares, pure like them: events, the sans-IO plumbing, multicast groups
and addresses, stripes, the protocol's timing, trade reports and the one link model.

Nothing here imports more than the standard library's pure parts (tests/unit/test_core_purity.py).
"""
