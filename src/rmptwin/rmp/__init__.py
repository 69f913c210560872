"""RMP cores (seed: rmp-internet-stock-market.txt sections 2, 4, 5): wire frames, source S_P,
primary R_P, secondary R_S, reformation server X_R, and H6's customer edge."""

from ..spec import token_passing_time_ms

__all__ = ["token_passing_time_ms"]
