"""`python -m omni_errors.pipeline serve`: the same as `omni-errors serve`."""

import sys

from omni_errors.pipeline.cli import main

sys.exit(main())
