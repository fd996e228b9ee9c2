"""`python -m builder.cli VERB ...`: the console script without installing it (multi-node launchers use it)."""

import sys

from builder.cli import main

sys.exit(main())
