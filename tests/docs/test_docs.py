"""The docs say what tracer does; this test holds them to it (the convention is in docs/contributing.md).

- Every ``sh`` block runs, line by line, in a scratch copy of the repository (specs/, examples/, README.md),
  each page's blocks in order; a line must exit 0, or the N of its ``# exit N`` comment.
  ``pip install`` and ``python3 -m venv`` lines (installs) are not run here (test_fresh_machine.py runs the README's two);
  ``# needs torch`` (``# needs tokenizers``) lines are skipped when torch (tokenizers) is missing; ``# slow`` lines
  (seconds each) run only under ``python -m pytest --slow``; the quick loop runs the commands of QUICK_PAGES, the rest
  run under --slow (as CI runs them).
- A ``text`` block right after ``<!-- output: COMMAND -->`` is exactly what COMMAND prints, except where it shows a
  machine-dependent number as a bound: ``≤ 1e-15`` in the block stands for ``= X`` with |X| at most 1e-15.
  When COMMAND is the command typed just before it, that one run's output is compared (it is not run twice).
  A line of plain words after ``tracer`` runs forked from a process that has imported tracer (run_commands):
  the same entry point, environment, files and exit code as the ``tracer`` script, without its start-up.
- Each page's ``python`` blocks run in order in one fresh process.
- Every relative link points to a file that exists, and every ``#anchor`` to a heading of it.

``python tests/docs/test_docs.py --update`` rewrites the ``<!-- output: ... -->`` blocks from a fresh run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]

# Pages other branches write; README and the reference link them already. A link to one of these is
# checked once the page exists. When every one of them is merged, empty this tuple.
PENDING_PAGES: tuple[str, ...] = ()  # pages linked before their branch is merged (none now)

COPIED = ("specs", "examples", "README.md")  # what the commands read; the scratch copy holds these and nothing else
TORCH = importlib.util.find_spec("torch") is not None
FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")
OUTPUT_MARK = re.compile(r"^\s*<!--\s*output:\s*(.+?)\s*-->\s*$")
EXIT = re.compile(r"#\s*exit\s+(\d+)\b")
NEEDS_TORCH = re.compile(r"#\s*needs torch\b")
TOKENIZERS = importlib.util.find_spec("tokenizers") is not None
NEEDS_TOKENIZERS = re.compile(r"#\s*needs tokenizers\b")  # text in: the checkpoints extra
SLOW = re.compile(r"#\s*slow\b")  # a command that takes seconds: run under --slow only
INSTALLS = ("pip install", "python3 -m venv")  # lines that install: not run by the docs' runner (the fresh-machine test runs the README's)
COMMENT = re.compile(r"\s+#.*$")  # a shell comment after a command (# exit 1, # needs torch, ...)


def pages() -> list[Path]:
    found = [REPO / "README.md", REPO / "README.zh-CN.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [p for p in found if p.exists()]


def page_id(p: Path) -> str:
    return p.relative_to(REPO).as_posix()


class Block(NamedTuple):
    lang: str
    lines: list[str]
    line: int  # 1-based line of the opening fence
    output_of: str | None  # the command of an <!-- output: ... --> mark right before the fence


def blocks(text: str) -> list[Block]:
    """Fenced blocks in order: their language, their lines (list indentation removed), and any output mark."""
    out: list[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.group(1), m.group(2), m.group(3).strip()
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = OUTPUT_MARK.match(prev)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(ticks) and lines[j].strip().strip("`") == ""):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        out.append(Block(info.split()[0] if info else "", body, i + 1, mark.group(1) if mark else None))
        i = j + 1
    return out


class Command(NamedTuple):
    text: str
    expect: int
    line: int
    output_block: Block | None = None  # the text block this command's stdout must equal
    again: bool = False  # the command typed just before it, as written: that run's output is this one's


def commands(text: str, slow: bool = True) -> list[Command]:
    """The commands a page asks the reader to type, in order, with the exit code each must give
    (without the ``# slow`` ones unless slow)."""
    out: list[Command] = []
    seen: list[str] = []  # every command of the page so far, run or left out

    def runs(line: str) -> bool:
        seen.append(line)
        return (not (NEEDS_TORCH.search(line) and not TORCH) and not (NEEDS_TOKENIZERS.search(line) and not TOKENIZERS)
                and not (SLOW.search(line) and not slow))

    for b in blocks(text):
        if b.output_of is not None:
            m = EXIT.search(b.output_of)
            expect = int(m.group(1)) if m else 0
            again = bool(seen) and bool(out) and seen[-1] == out[-1].text and out[-1].expect == expect \
                and COMMENT.sub("", out[-1].text) == COMMENT.sub("", b.output_of)
            if runs(b.output_of):
                out.append(Command(b.output_of, expect, b.line, b, again))
        if b.lang not in ("sh", "bash", "shell"):
            continue
        pending = ""
        for k, raw in enumerate(b.lines):
            line = pending + raw.strip()
            if line.endswith("\\"):
                pending = line[:-1].rstrip() + " "
                continue
            pending = ""
            if not line or line.startswith("#") or line.startswith(INSTALLS) or not runs(line):
                continue
            m = EXIT.search(line)
            out.append(Command(line, int(m.group(1)) if m else 0, b.line + 1 + k))
    return out


def python_code(text: str) -> str:
    return "\n".join("\n".join(b.lines) for b in blocks(text)
                     if b.lang == "python" and (TORCH or not any(NEEDS_TORCH.search(x) for x in b.lines)))


def scratch_env(root: Path) -> dict[str, str]:
    """`tracer` and `python` on PATH are this checkout's tracer and this interpreter, and the other scripts of its
    environment come next (whether or not it is activated); English; no colour."""
    bindir = root / ".bin"
    bindir.mkdir()
    main = "import sys; sys.argv[0] = 'tracer'; from tracer.__main__ import main; sys.exit(main())"  # as pip's script does
    shims = {"tracer": f'#!/bin/sh\nexec "{sys.executable}" -c "{main}" "$@"\n',
             "python": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n'}
    shims["python3"] = shims["python"]
    for name, text in shims.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "TRACER_DEBUG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")}
    env.update(LANG="C.UTF-8", PATH=os.pathsep.join([str(bindir), str(Path(sys.executable).parent), env.get("PATH", os.defpath)]),
               PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}")
    return env


def make_scratch(root: Path) -> dict[str, str]:
    for name in COPIED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, root / name, symlinks=True)
        else:
            shutil.copy2(REPO / name, root / name)  # docs/files.md shows tracer refusing to replace README.md
    return scratch_env(root)


class Result(NamedTuple):
    command: Command
    code: int
    stdout: str
    stderr: str


# A command of plain words after `tracer` (no pipe, redirection, variable, glob or environment setting; quotes with nothing to expand in them) runs
# in a process forked from one that has imported tracer already (the page's "zygote"): the same entry point
# (tracer.__main__.main, as the `tracer` script calls it), the page's environment, its own stdin (/dev/null),
# stdout and stderr files and exit code, without the half second of interpreter start-up and imports each.  Every
# other line runs in bash, in its own subshell, where `tracer` is the shim of scratch_env.
PLAIN = re.compile(r"tracer(?: [^|&;<>$`()\\'\"*?~{}\[\]=!#]+)?")
ZYGOTE = """
import json, os, sys
from tracer.__main__ import main
import numpy, tracer.cli.app, tracer.engine.executor, tracer.run.command, tracer.views.tables, tracer.views.text  # what most commands import
commands, replies = os.fdopen(3, "r"), 4
for line in commands:
    argv, out, err = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.close(3); os.close(4)
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            f = os.open(path, flags, 0o644); os.dup2(f, fd); os.close(f)
        sys.argv = ["tracer", *argv]
        code = 0
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                sys.stderr.write(f"{e.code}\\n")
        finally:
            try:
                sys.stdout.flush(); sys.stderr.flush()
            finally:
                os._exit(code)
    status = os.waitpid(pid, 0)[1]
    code = os.waitstatus_to_exitcode(status)
    os.write(replies, f"{128 - code if code < 0 else code}\\n".encode())
"""


QUOTED = re.compile(r"\"[^\"$`\\\\!]*\"|'[^']*'")  # a quoted word without anything the shell would expand in it


def plain_tracer(text: str) -> list[str] | None:
    """The arguments of a plain `tracer ...` line (a trailing comment dropped), or None for any other line."""
    line = COMMENT.sub("", text).strip()
    return shlex.split(line)[1:] if PLAIN.fullmatch(QUOTED.sub("q", line)) else None


class Zygote:
    """A Python process that has imported tracer; run() forks it for one command."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        cmd_r, self.cmd_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        os.set_inheritable(cmd_r, True)
        os.set_inheritable(reply_w, True)
        boot = f"import os; os.dup2({cmd_r}, 3); os.dup2({reply_w}, 4); exec({ZYGOTE!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", boot], cwd=root, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(cmd_r, reply_w),
                                     start_new_session=True)
        os.close(cmd_r)
        os.close(reply_w)
        self.replies = os.fdopen(self.reply_r, "r")

    def run(self, argv: list[str], out: Path, err: Path, timeout: float = 600) -> int:
        import select

        os.write(self.cmd_w, (json.dumps([argv, str(out), str(err)]) + "\n").encode())
        ready, _, _ = select.select([self.replies], [], [], timeout)
        line = self.replies.readline() if ready else ""
        if not line:
            self.close()
            return -1
        return int(line)

    def close(self) -> None:
        os.close(self.cmd_w)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self.replies.close()


def run_commands(cmds: list[Command], root: Path, env: dict[str, str]) -> list[Result]:
    """Every command in order, each with its own stdout, stderr and exit code: the plain `tracer ...` lines forked
    from the page's zygote, the others in bash (one bash process for each run of them), each in its own subshell.
    A command typed again right away (Command.again) is not run twice: the run before it is its result."""
    logs = root / ".logs"
    logs.mkdir(exist_ok=True)
    runs = []  # for each command, the index of the run whose result it takes
    script: list[str] = []
    zygote: Zygote | None = None

    def flush() -> None:
        if script:
            subprocess.run(["bash", "-c", "\n".join(["cd " + _quote(str(root)), *script])], env=env, cwd=root,
                           timeout=600, check=False)
            script.clear()

    try:
        for i, c in enumerate(cmds):
            if c.again and i > 0:
                runs.append(runs[-1])
                continue
            runs.append(i)
            argv = plain_tracer(c.text)
            if argv is None:
                script.append(f"( {c.text}\n) >{logs}/{i}.out 2>{logs}/{i}.err </dev/null; echo $? >{logs}/{i}.rc")
                continue
            flush()
            zygote = zygote or Zygote(root, env)
            (logs / f"{i}.rc").write_text(f"{zygote.run(argv, logs / f'{i}.out', logs / f'{i}.err')}\n")
        flush()
    finally:
        if zygote is not None:
            zygote.close()
    out = []
    for c, i in zip(cmds, runs):
        rc = (logs / f"{i}.rc").read_text().strip()
        out.append(Result(c, int(rc) if rc else -1, (logs / f"{i}.out").read_text(encoding="utf-8", errors="replace"),
                          (logs / f"{i}.err").read_text(encoding="utf-8", errors="replace")))
    return out


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


# A number that depends on the machine (a difference at rounding level: 0 on one, 1.39e-17 on another) is shown as
# a bound: `≤ 1e-15` in a text block stands for `= X` in what tracer prints, with |X| at most 1e-15.
BOUND = re.compile(r"≤ (\d+(?:\.\d*)?(?:e[-+]?\d+)?)")
NUMBER = r"= (-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?|-?inf|nan)"


def line_matches(shown: str, printed: str) -> bool:
    """One line of a text block against the line tracer printed: equal, but for the bounds."""
    parts = BOUND.split(shown)  # text, bound, text, bound, ..., text
    if len(parts) == 1:
        return shown == printed
    m = re.fullmatch("".join(re.escape(p) if i % 2 == 0 else NUMBER for i, p in enumerate(parts)), printed)
    return m is not None and all(abs(float(x)) <= float(bound) for x, bound in zip(m.groups(), parts[1::2]))


def output_matches(shown: str, printed: str) -> bool:
    a, b = normalise(shown).split("\n"), normalise(printed).split("\n")
    return len(a) == len(b) and all(line_matches(x, y) for x, y in zip(a, b))


# -- links ------------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_code = not in_code
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not in_code:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def prose(text: str) -> str:
    """The page without its code (fenced blocks and inline code), where links are not links."""
    keep, in_code = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            keep.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(keep)


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    bad = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        rel = dest.relative_to(root).as_posix() if dest.is_relative_to(root) else str(dest)
        if not dest.exists():
            if rel not in PENDING_PAGES:
                bad.append(f"{target}: no such file {rel}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            bad.append(f"{target}: {rel} has no heading with the anchor #{anchor}")
    return bad


# -- the tests --------------------------------------------------------------------------------------

PAGES = pages()


def test_every_doc_page_is_found() -> None:
    names = {page_id(p) for p in PAGES}
    assert {"README.md", "README.zh-CN.md", "docs/guide.md", "docs/reference.md", "docs/coursework.md",
            "docs/contributing.md"} <= names


RUN_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/tracer run specs/ch17-prenorm.yaml"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"


def test_readme_keeps_the_two_fresh_machine_commands() -> None:
    for page in ("README.md", "README.zh-CN.md"):
        text = (REPO / page).read_text(encoding="utf-8")
        sh = [line for b in blocks(text) if b.lang == "sh" for line in b.lines]
        assert RUN_COMMAND in sh, page  # tests/docs/test_fresh_machine.py runs both as written
        assert TEST_COMMAND in sh, page


QUICK_PAGES = ("README.md", "README.zh-CN.md", "docs/guide.md")  # in the quick loop; every other page's commands under --slow (CI)


def _command_pages() -> list[Any]:
    return [p if page_id(p) in QUICK_PAGES else pytest.param(p, marks=pytest.mark.slow, id=page_id(p))
            for p in PAGES if commands(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", _command_pages(), ids=page_id)
def test_commands_run_as_written(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    cmds = commands(page.read_text(encoding="utf-8"), slow=bool(request.config.getoption("--slow", default=True)))
    results = run_commands(cmds, tmp_path, make_scratch(tmp_path))
    failures = []
    for r in results:
        where = f"{page_id(page)}:{r.command.line}: {r.command.text}"
        if r.code != r.command.expect:
            failures.append(f"{where}\n  exit {r.code}, the page says {r.command.expect}\n  stderr: {r.stderr.strip()[-600:]}")
        elif "Traceback (most recent call last)" in r.stderr:
            failures.append(f"{where}\n  printed a traceback:\n{r.stderr[-600:]}")
        elif r.command.output_block is not None and not output_matches("\n".join(r.command.output_block.lines), r.stdout):
            import difflib

            delta = "\n".join(difflib.unified_diff(normalise("\n".join(r.command.output_block.lines)).split("\n"),
                                                   normalise(r.stdout).split("\n"), "the page", "tracer prints", lineterm=""))
            failures.append(f"{where}\n  the output shown differs from what tracer prints "
                            f"(python tests/docs/test_docs.py --update rewrites it):\n{delta}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("page", [p for p in PAGES if python_code(p.read_text(encoding="utf-8")).strip()], ids=page_id)
def test_python_snippets_run(page: Path, tmp_path: Path) -> None:
    env = make_scratch(tmp_path)
    script = tmp_path / "snippets.py"
    script.write_text(python_code(page.read_text(encoding="utf-8")), encoding="utf-8")
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{page_id(page)}: the python blocks exit {r.returncode}:\n{r.stderr[-2000:]}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_links_point_to_files_and_headings_that_exist(page: Path) -> None:
    assert broken_links(page) == []


# -- the test's own parts: they must be able to fail ------------------------------------------------

SAMPLE = """\
Intro with a [link](missing.md) and `[not a link](nowhere.md)`.

```sh
tracer run a.yaml
tracer run b.yaml   # exit 1
# a comment line
pip install -e .
tracer import x   # needs torch
tracer grad big.yaml   # slow
tracer run c.yaml \\
  --pos 1
```

<!-- output: tracer run a.yaml --pos 2 -->
```text
table
```

```sh
tracer run a.yaml --pos 2
```

<!-- output: tracer run a.yaml --pos 2 -->
```text
table
```

1. In a list:
   ```sh
   tracer diff a.yaml b.yaml   # exit 1
   ```

## A heading: `--lang zh|en`
"""


def test_commands_are_parsed_by_the_convention() -> None:
    got = [(c.text.split("#")[0].strip(), c.expect, c.output_block is not None, c.again) for c in commands(SAMPLE)]
    want = [("tracer run a.yaml", 0, False, False), ("tracer run b.yaml", 1, False, False)]
    if TORCH:
        want.append(("tracer import x", 0, False, False))
    want += [("tracer grad big.yaml", 0, False, False), ("tracer run c.yaml --pos 1", 0, False, False),
             ("tracer run a.yaml --pos 2", 0, True, False),  # not the command typed just before
             ("tracer run a.yaml --pos 2", 0, False, False), ("tracer run a.yaml --pos 2", 0, True, True),  # typed just before
             ("tracer diff a.yaml b.yaml", 1, False, False)]
    assert got == want
    assert [c.text for c in commands(SAMPLE, slow=False)] == [c.text for c in commands(SAMPLE) if "big.yaml" not in c.text]


def test_a_bound_in_an_output_block_holds_within_the_bound_only() -> None:
    shown = "verify: largest |NumPy - reference| over all stages ≤ 1e-15 (every sample and position)"
    for printed, ok in [("= 1.39e-17", True), ("= 0", True), ("= 1e-15", True), ("= 3.2e-15", False), ("= 0.5", False),
                        ("= nan", False), ("= inf", False), ("≤ 1e-15", False)]:
        line = f"verify: largest |NumPy - reference| over all stages {printed} (every sample and position)"
        assert line_matches(shown, line) is ok, printed
    assert not line_matches(shown, "verify: largest |NumPy - reference| over all stages = 0 (every sample)")  # the rest: as written
    assert output_matches(f"a\n{shown}\n", f"a\n{shown.replace('≤ 1e-15', '= 2e-17')}") and not output_matches(shown, f"a\n{shown}")
    assert line_matches("x = 1.39e-17", "x = 1.39e-17") and not line_matches("x = 1.39e-17", "x = 0")  # no bound: exact


def test_links_and_anchors_are_checked(tmp_path: Path) -> None:
    assert slug("A heading: `--lang zh|en`") == "a-heading---lang-zhen"
    assert slug("Memory: `--max-memory`, `--record`") == "memory---max-memory---record"
    assert slug("中文指南：第一个位置") == "中文指南第一个位置"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading: `--lang zh|en`\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(SAMPLE + "[ok](other.md#a-heading---lang-zhen) [bad](other.md#no-such) [self](#a-heading---lang-zhen) "
                    "[web](https://example.org/x.md)\n", encoding="utf-8")
    assert broken_links(page, tmp_path) == ["missing.md: no such file docs/missing.md",
                                            "other.md#no-such: docs/other.md has no heading with the anchor #no-such"]


def test_a_forked_command_prints_and_exits_as_the_script_does(tmp_path: Path) -> None:
    """A plain line (forked from the zygote) and the same line in bash (the `tracer` script) print the same bytes
    and exit alike, for a table, an exit 1, a refusal (exit 2) and a file written."""
    assert plain_tracer("tracer run a.yaml --pos 1   # exit 1") == ["run", "a.yaml", "--pos", "1"]
    assert plain_tracer("tracer check a.yaml --expect \"[1, -2]\" --stage 'pre'") == ["check", "a.yaml", "--expect", "[1, -2]", "--stage", "pre"]
    assert [plain_tracer(x) for x in ("tracer run a.yaml | tail -n 1", "LANG=zh_CN.UTF-8 tracer run a.yaml", "tracer run \"$A\"",
                                      "tracer run *.yaml", "tracer run a.yaml > b", "python x.py")] == [None] * 6
    env = make_scratch(tmp_path)
    lines = ["tracer run specs/ch17-prenorm.yaml --pos 1", "tracer run examples/violations/beta-typo.yaml",
             "tracer check specs/ch17-prenorm.yaml --stage x --expect '[[1, 5]]'",  # wrong (a wrong count is exit 2)
             "tracer run no-such.yaml", "tracer run specs/ch17-prenorm.yaml --save a.npz"]
    forked = run_commands(commands("```sh\n" + "\n".join(lines) + "\n```\n"), tmp_path, env)
    (tmp_path / "a.npz").rename(tmp_path / "forked.npz")
    in_bash = run_commands(commands("```sh\n" + "\n".join("true && " + x for x in lines) + "\n```\n"), tmp_path, env)
    assert [(r.code, r.stdout, r.stderr) for r in forked] == [(r.code, r.stdout, r.stderr) for r in in_bash]
    assert [r.code for r in forked] == [0, 1, 1, 2, 0]
    import numpy as np

    with np.load(tmp_path / "forked.npz") as a, np.load(tmp_path / "a.npz") as b:  # the same arrays (a zip's times differ)
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_a_failing_command_is_caught(tmp_path: Path) -> None:
    env = make_scratch(tmp_path)
    results = run_commands(commands("```sh\ntracer run no-such.yaml\ntracer run specs/ch17-prenorm.yaml   # exit 1\n```\n"), tmp_path, env)
    assert [(r.code, r.command.expect) for r in results] == [(2, 0), (0, 1)]


# -- python tests/docs/test_docs.py --update -------------------------------------------------------------

def update() -> None:
    """Rewrite every <!-- output: COMMAND --> block with what COMMAND prints now."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        cmds = commands(text)
        if not any(c.output_block for c in cmds):
            continue
        with tempfile.TemporaryDirectory() as d:
            results = run_commands(cmds, Path(d), make_scratch(Path(d)))
        lines = text.split("\n")
        for r in sorted((r for r in results if r.command.output_block), key=lambda r: -r.command.line):
            b = r.command.output_block
            assert b is not None
            indent = FENCE.match(lines[b.line - 1]).group(1)  # type: ignore[union-attr]
            printed, shown = normalise(r.stdout).split("\n"), normalise("\n".join(b.lines)).split("\n")
            if len(printed) == len(shown):  # a bound that still holds stays a bound
                printed = [old if BOUND.search(old) and line_matches(old, new) else new for old, new in zip(shown, printed)]
            new = [indent + x if x else x for x in printed]
            lines[b.line: b.line + len(b.lines)] = new
        page.write_text("\n".join(lines), encoding="utf-8")
        print(f"updated {page_id(page)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        sys.exit("usage: python tests/docs/test_docs.py --update")
