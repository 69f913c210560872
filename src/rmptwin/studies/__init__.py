"""Studies that run many experiments and read their run directories: the sequencer taxonomy's
comparison, the venue's rate sweeps, and the classroom labs' checks."""
