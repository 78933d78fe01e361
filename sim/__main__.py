"""``python -m sim`` runs the dtsim command line."""

import sys

from .cli import main

sys.exit(main())
