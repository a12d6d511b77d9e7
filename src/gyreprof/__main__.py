"""``python -m gyreprof``: the same as the ``gyreprof`` command."""

import sys

from gyreprof.cli import main

sys.exit(main())
