"""`python -m aiayn VERB ...`: the console script (multi-node launchers and sweeps use it)."""

import sys

from aiayn.builder.cli import main

if __name__ == "__main__":
    sys.exit(main())
