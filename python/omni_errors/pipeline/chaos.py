"""Placeholder replaced below."""

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run_cli(args: argparse.Namespace) -> int:
    return 0
