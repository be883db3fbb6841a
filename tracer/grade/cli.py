"""``tracer grade``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_OK, UsageError
from tracer.messages import msg

if TYPE_CHECKING:
    pass


def grade(
    students: Annotated[str, typer.Argument(metavar="STUDENTS", show_default=False,
                                            help="Folder of hand-ins: one subfolder per student (NAME/TASK.yaml), or NAME.yaml files for one task.")],
    reference: Annotated[str, typer.Argument(metavar="REFERENCE", show_default=False,
                                             help="Folder of reference traces, one TASK.json per task (tracer run SOLUTION.yaml --json --with-weights).")],
    task: Annotated[str | None, typer.Option("--task", metavar="TASK", show_default=False,
                                             help="The task a flat folder of NAME.yaml answers (needed when REFERENCE holds several).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON Lines on stdout instead of the sheet: one object per student and task.")] = False,
    csv_file: Annotated[str | None, typer.Option("--csv", metavar="FILE", show_default=False,
                                                 help="Also write the sheet as CSV to FILE (- : on stdout instead of the sheet).")] = None,
    atol: Annotated[float | None, typer.Option("--atol", show_default=False,
                                               help="Absolute tolerance of each diff, as tracer diff: default 1e-9, or 1e-5 against float32 arrays.")] = None,
    rtol: Annotated[float | None, typer.Option("--rtol", show_default=False,
                                               help="Relative tolerance of each diff, as tracer diff: default 1e-9, or 1e-5 against float32 arrays.")] = None,
    force: shared.ForceOption = False,
    lang: shared.LangOption = None,
) -> None:
    """Grade a class: each hand-in diffed against its task's reference (tracer diff --keep-going), scored, one sheet.

    Each hand-in may read only files inside its own folder (--confine is always on). Exit code: 0 the sheet
    was written (whatever the scores), 2 a folder is missing or empty, or a flat folder's task is not clear.
    """

    def body() -> int:
        from tracer.compare.judge import check_tolerance
        from tracer.grade import view
        from tracer.grade.sheet import folder, inputs, sheet

        check_tolerance(1e-9 if atol is None else atol, 1e-9 if rtol is None else rtol)
        if as_json and csv_file == "-":
            raise UsageError(msg("--json and --csv - both write to stdout: give one, or --csv FILE"))
        studs, refs = folder(students), folder(reference)
        if csv_file not in (None, "-"):
            from tracer.files import check_output

            check_output(csv_file, "--csv", inputs(studs, refs), "csv", force)  # never over a hand-in or a reference
        layout, grades = sheet(studs, refs, atol, rtol, task)
        shared.note_line(view.layout_line(students, layout, grades))
        if csv_file not in (None, "-"):
            from tracer.files import write_atomic

            data = view.as_csv(grades).encode("utf-8")
            write_atomic(csv_file, lambda fh: fh.write(data), "--csv", "csv", force)
        if as_json:
            sys.stdout.write(view.as_json_lines(grades))
        elif csv_file == "-":
            sys.stdout.write(view.as_csv(grades))
        else:
            sys.stdout.write(view.as_text(grades))
        return EXIT_OK

    shared.guarded(body, lang)
