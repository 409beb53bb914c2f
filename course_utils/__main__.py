"""``python -m course_utils COMMAND``: the course's command line. One command so far, ``doctor``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from course_utils import doctor


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m course_utils``, with one subparser per command."""
    parser = argparse.ArgumentParser(prog="python -m course_utils",
                                     description="Command-line tools of the Accelerated Deep Learning course.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor.add_arguments(commands.add_parser("doctor", help="check this machine and say what each lesson will do",
                                             description=doctor.DESCRIPTION))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command named in ``argv`` (default: ``sys.argv[1:]``) and return its exit status.

    Without a command, or with a bad option, print the usage and exit with status 2.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("no command given. Try `python -m course_utils doctor` (checks this machine for the course; "
                     "`--help` lists its options).")
    return doctor.run(args)


if __name__ == "__main__":
    sys.exit(main())
