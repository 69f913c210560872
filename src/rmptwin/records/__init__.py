"""What a driver records and hands to the run directory: the event, drop and count tables'
schemas, the names of the frames in drop records, and timer-lateness histograms."""
