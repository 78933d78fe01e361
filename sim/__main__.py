"""``python -m sim`` runs the dtsim command line."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while starting up: one line, as later
    print("dtsim: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
