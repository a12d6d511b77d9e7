"""The small helpers every floor above may use: errors, file writing, number formats,
argument checks, limits, subprocess and thread-name helpers, the stats-block reader, the
renderers' registry and the advice wording. Nothing here imports gyreprof above ``_core``."""
