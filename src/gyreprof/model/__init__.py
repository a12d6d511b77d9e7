"""What a measurement is, apart from how it was taken: snapshot records and their binary
format, merge and interval algebra, summaries, windows, histograms, the record codec and
the run folder's file names. The model imports only ``_support`` and ``_core``."""
