"""``python -m course_utils COMMAND``: the course's command line: ``doctor``, ``execute``, ``gpu-run``, ``slides``,
``handouts`` and ``links``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from course_utils import colab, doctor

DOCTOR = ("Print what this machine has (CPU, GPUs, versions, data, network, run profile) and what each lesson "
          "will do on it; exit with 1 when a lesson cannot run.")
EXECUTE = ("Execute lessons top to bottom: with the quick profile in place (their committed outputs), or with the "
           "full profile into notebooks/full/ (the published lecture-scale results, skipped when already run on the "
           "lesson's current code); exit with 1 when a lesson fails.")
GPU_RUN = ("Run lessons on a GPU machine in the quick profile and record what ran: cell by cell, what was skipped "
           "(a cell that needs TensorFlow where it is not installed), what failed, each claim's outcome, and which "
           "compared cells print other outputs than the committed ones; lessons run side by side with --jobs and are "
           "stopped at --deadline. Writes gpu-run.json, gpu-run.md and the executed notebooks to --out; exit with 1 "
           "when a cell failed or a lesson did not finish.")
SLIDES = ("Measure lessons' decks: slides, words and code lines on a slide, speaker notes (a Markdown table); with "
          "--check, list the slides over the rule of CONTRIBUTING.md (at most 50 words and 15 lines of code on a "
          "slide) and exit with 1 if there is one.")
HANDOUTS = ("Print the slide decks of lessons (made by `make slides` in build/slides/) to PDF handouts, one page per "
            "slide, with headless Chromium; exit with 1 when a deck is missing.")
LINKS = ("Point every badge, Colab install line and project URL of this checkout at the repository and ref named in "
         "course_utils/colab.py (after a fork, or for a release tag); with --check, only list the files that "
         "disagree and exit with 1 if any does.")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m course_utils``, with one subparser per command."""
    parser = argparse.ArgumentParser(prog="python -m course_utils",
                                     description="Command-line tools of the Accelerated Deep Learning course.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = commands.add_parser("doctor", help="check this machine and say what each lesson will do",
                                 description=DOCTOR)
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.add_argument("--offline", action="store_true", help="skip the network check")
    doctor.add_argument("--timeout", type=_positive_seconds, default=3.0, metavar="SECONDS",
                        help="time limit of the network check (default: 3)")
    doctor.add_argument("--no-tensorflow", action="store_true",
                        help="do not import TensorFlow (faster; its GPUs are then not listed)")
    run = commands.add_parser("execute", help="execute lessons with a run profile and keep their outputs",
                              description=EXECUTE)
    run.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK", help="e.g. notebooks/02_optimizers.ipynb")
    run.add_argument("--profile", choices=("quick", "full"), default="quick", help="run profile (default: quick)")
    run.add_argument("--force", action="store_true", help="full profile: run lessons whose published copy is current")
    gpu = commands.add_parser("gpu-run", help="run lessons on a GPU machine and record what ran", description=GPU_RUN)
    gpu.add_argument("notebooks", nargs="*", type=Path, metavar="NOTEBOOK",
                     help="default: every lesson in notebooks/")
    gpu.add_argument("--out", type=Path, default=Path("build/gpu-run"), help="where the record goes")
    gpu.add_argument("--jobs", type=int, default=1, help="lessons run side by side (default: 1)")
    gpu.add_argument("--deadline", type=_positive_seconds, default=3600.0, metavar="SECONDS",
                     help="stop lessons still running after this long (default: 3600)")
    gpu.add_argument("--cell-timeout", type=int, default=600, metavar="SECONDS", help="one cell's limit (default: 600)")
    gpu.add_argument("--without", action="append", default=[], metavar="MODULE",
                     help="run as if MODULE were not installed (its cells are skipped), e.g. tensorflow")
    gpu.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: one lesson, in a process of its own
    slides = commands.add_parser("slides", help="measure lessons' decks against the slide rule", description=SLIDES)
    slides.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK", help="e.g. notebooks/01_autograd.ipynb")
    slides.add_argument("--check", action="store_true", help="list the slides over the rule; exit with 1 if any")
    handouts = commands.add_parser("handouts", help="print lessons' slide decks to PDF", description=HANDOUTS)
    handouts.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK",
                          help="e.g. notebooks/01_autograd.ipynb")
    handouts.add_argument("--decks", type=Path, default=Path("build/slides"), help="where the decks are")
    handouts.add_argument("--out", type=Path, default=Path("build/handouts"), help="where the PDFs go")
    links = commands.add_parser("links", help="point badges and install lines at course_utils/colab.py's repository",
                                description=LINKS)
    links.add_argument("--check", action="store_true", help="change nothing; exit with 1 if a file disagrees")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command named in ``argv`` (default: ``sys.argv[1:]``) and return its exit status.

    Without a command, or with a bad option, print the usage and exit with status 2. ``doctor`` exits with 1
    when a lesson cannot run on this machine, ``execute`` when a lesson fails, else 0.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("no command given. Try `python -m course_utils doctor` (checks this machine for the course; "
                     "`--help` lists its options).")
    if args.command == "execute":
        from course_utils import execute  # needs Jupyter's nbclient: requirements.txt has it, the package does not

        missing = [str(path) for path in args.notebooks if not path.is_file()]
        if missing:
            parser.error(f"no such notebook: {', '.join(missing)}")
        try:
            for path in args.notebooks:
                execute.lesson_number(path)
        except ValueError as error:
            parser.error(str(error))
        return execute.run(args.notebooks, args.profile, force=args.force)
    if args.command == "gpu-run":
        return _gpu_run(args, parser)
    if args.command == "links":
        return _links(check=args.check)
    if args.command == "handouts":
        return _handouts(args.notebooks, args.decks, args.out)
    if args.command == "slides":
        return _slides(args.notebooks, check=args.check)
    report = doctor.collect(network=not args.offline, tensorflow=not args.no_tensorflow, timeout=args.timeout)
    print(json.dumps(doctor.to_json(report), indent=2) if args.json else doctor.format_report(report))
    return doctor.exit_status(report)


def _gpu_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from course_utils import execute, gpu_run  # need Jupyter's nbclient: requirements.txt has it, the package does not

    if args.one:
        gpu_run.run_lesson(args.one, args.out, args.cell_timeout, gpu_run.missing_modules(tuple(args.without)))
        return 0
    notebooks = args.notebooks or sorted(Path(gpu_run.CHECKOUT, "notebooks").glob("[0-9][0-9]_*.ipynb"))
    missing = [str(path) for path in notebooks if not path.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        for path in notebooks:
            execute.lesson_number(path)
    except ValueError as error:
        parser.error(str(error))
    return gpu_run.run(notebooks, args.out, jobs=args.jobs, deadline_s=args.deadline, cell_timeout=args.cell_timeout,
                       without=tuple(args.without))


def _slides(notebooks: Sequence[Path], *, check: bool) -> int:
    from course_utils import slides  # needs nbconvert: requirements.txt has it, the package does not

    missing = [str(path) for path in notebooks if not path.is_file()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}")
        return 2
    print(slides.stats(notebooks))
    if not check:
        return 0
    found = {path: slides.too_full(json.loads(path.read_text())) for path in notebooks}
    for path, problems in found.items():
        for problem in problems:
            print(f"{path}: {problem}")
    return 1 if any(found.values()) else 0


def _handouts(notebooks: Sequence[Path], decks: Path, out: Path) -> int:
    from course_utils import handouts  # needs Playwright: requirements.txt has it, the package does not

    missing = [decks / f"{nb.stem}.slides.html" for nb in notebooks if not (decks / f"{nb.stem}.slides.html").is_file()]
    if missing:
        print(f"no deck {', '.join(map(str, missing))}: build the decks first (`make slides`, or `make handouts`, "
              "which does)")
        return 1
    for nb in notebooks:
        pdf = out / f"{nb.stem}.pdf"
        pages = handouts.print_deck(decks / f"{nb.stem}.slides.html", pdf)
        print(f"{pdf}: {pages} pages")
    return 0


def _links(*, check: bool) -> int:
    root = Path(colab.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        print(f"{root} is not a checkout of the course: `links` rewrites the files of a clone (clone, then run it "
              "there).")
        return 2
    files = colab.stale_links(root) if check else colab.write_links(root)
    where = f"{colab.REPOSITORY}@{colab.REF}"
    for path in files:
        print(f"{'disagrees with' if check else 'now points at'} {where}: {path.relative_to(root)}")
    if not files:
        print(f"every link points at {where}")
    return 1 if check and files else 0


if __name__ == "__main__":
    sys.exit(main())
