"""`python -m omni_errors_tools.pipeline serve`: the same as `omni-errors serve`."""

import sys

from omni_errors_tools.pipeline.commands import main

sys.exit(main())
