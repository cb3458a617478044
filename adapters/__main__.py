"""`python -m adapters` runs the `nerve` command line."""

import sys

from adapters.cli import main

sys.exit(main())
