#!/usr/bin/env python3
"""Grade student specs against reference traces and print a score sheet: a thin wrapper of `tracer grade`.

Usage:
    python examples/coursework/grade.py STUDENTS REFERENCE [--task TASK] [--csv] [--atol X] [--rtol X] [--lang zh|en]

The grading is `tracer grade STUDENTS REFERENCE` (tracer/grade/, docs/coursework.md): the two layouts of
STUDENTS (one subfolder per student, NAME/TASK.yaml, or a flat folder of NAME.yaml files for one task),
the rubric (runs, contract, structure, settings, stages: 2 points each, tracer/grade/sheet.py RUBRIC),
every hand-in confined to its own folder, all in one process.  This script keeps its old options:
--csv writes the CSV sheet on stdout (`tracer grade --csv -`); the rest are passed through as they are.
Exit 0 when the sheet was written, 2 when a folder is missing or empty or the flat layout's task is not clear.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Grade student specs against reference traces (tracer grade).")
    ap.add_argument("students", help="folder: one subfolder per student (NAME/TASK.yaml), or NAME.yaml files for one task")
    ap.add_argument("reference", help="folder: one reference trace TASK.json per task")
    ap.add_argument("--task", help="the task a flat folder of NAME.yaml answers (needed when REFERENCE holds several)")
    ap.add_argument("--csv", action="store_true", help="write the sheet as CSV")
    ap.add_argument("--lang", choices=("zh", "en"), help="words of the text sheet: zh (the book's Chinese) or en; default: the locale")
    ap.add_argument("--atol", help="absolute tolerance (default 1e-09)")
    ap.add_argument("--rtol", help="relative tolerance (default 1e-09)")
    args = ap.parse_args(argv)
    command = ["grade", args.students, args.reference]
    for option in ("task", "lang", "atol", "rtol"):
        if getattr(args, option) is not None:
            command += [f"--{option}", getattr(args, option)]
    if args.csv:
        command += ["--csv", "-"]
    from tracer.cli.app import app_for

    try:
        app_for(command)(command, prog_name="tracer")
    except SystemExit as e:
        return int(e.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
