"""`python -m omni_errors.pipeline serve`: the same as `omni-errors serve`."""

import sys

from omni_errors.pipeline.commands import main

sys.exit(main())
