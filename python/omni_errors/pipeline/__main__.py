"""`python -m omni_errors.pipeline serve|chaos`."""

import sys

from omni_errors.pipeline.cli import main

sys.exit(main())
