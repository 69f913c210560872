"""Applications built on the RMP ring and the venue cores (seed section 7): each a pure package."""
