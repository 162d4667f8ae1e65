"""`python -m omni_errors_tools.chaos`: the same as `omni-errors chaos`."""

import argparse
import sys

from omni_errors_tools.chaos.command import add_arguments, run_cli

parser = argparse.ArgumentParser(prog="python -m omni_errors_tools.chaos")
add_arguments(parser)
sys.exit(run_cli(parser.parse_args()))
