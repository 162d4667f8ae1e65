"""`python -m omni_errors_cli`: the same as `omni-errors`."""

import sys

from omni_errors_cli import main

sys.exit(main())
