"""`tracer check SPEC --stage NAME --expect "[1, -2, -1]"`: is a hand-worked answer right?

The spec is run as `tracer run` runs it; the stage's value at one sample and position ([C], [F], ...)
is compared with the numbers the student gives, to the printed precision: an entry is right when it
rounds to what `tracer run --precision P` prints (|given - value| <= half a unit in the last of the
P decimals).  A spec computed in float32 (or float16) is judged at its dtype's precision: an entry is right
when it is right against the run's own value or against the exact value (the same spec in float64), since
a hand computation is exact and the float32 run is not.  NaN and infinities are values a broken block
computes (a softmax of a row that reads no key): ``nan``, ``inf`` and ``-inf`` are accepted, right where the
stage holds the same, and a note says which stage first produced them.  Right: exit 0.  Wrong: exit 1, naming
the entries that differ but not the values (the student looks them up with `tracer run` on purpose).  A bad
--expect (a wrong count of numbers too), stage, --pos or --batch: exit 2.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from tracer.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, UsageError
from tracer.messages import Message, msg
from tracer.model.contracts import kind_word


class Verdict(NamedTuple):
    right: bool
    line: str  # one line: a Message, English as a str (the CLI renders it)
    notes: tuple[str, ...] = ()  # with a right answer: where a NaN began, the exact value's, and the mistakes this spec cannot show (Messages)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.right else EXIT_VIOLATION


# what a student types in place of '[', ']' and ',': parentheses, full-width brackets and commas, the ideographic comma
_EXPECT_TYPED = str.maketrans({"(": "[", ")": "]", "（": "[", "）": "]", "【": "[", "】": "]", "［": "[", "］": "]", "，": ",",
                        "、": ",", "－": "-", "\u3000": " "})
_EXPECT_TOKEN = re.compile(r"\[|\]|[^\s,\[\]]+|,")
TYPED_NONFINITE = ("nan", "inf", "infinity")  # what a student types for NaN and the infinities (any case, with a sign)
NARROW = ("float32", "float16")  # dtypes a hand computation is more exact than


def parse_expect(text: str) -> list[float]:
    """'[1, -2, -1]', '1, -2, -1', '[[1, 0], [0, 1]]' (flattened, row by row), and what students type:
    NumPy's printed form '[ 0.99998 -0.99998]' (spaces between the numbers, also `array([...])`),
    parentheses, full-width brackets and commas （，【】［］） -> numbers."""
    bad = UsageError(msg("--expect {text}: expected a list of numbers such as [1, -2, -1]", text=repr(text)))
    typed = text.translate(_EXPECT_TYPED).strip()
    if typed.startswith("array") and typed[5:].lstrip().startswith("["):  # repr of a NumPy array: array([1., 2.])
        typed = typed[5:].strip()
    numbers: list[float] = []
    depth = 0
    for token in _EXPECT_TOKEN.findall(typed):
        if token == "[":
            depth += 1
        elif token == "]":
            depth -= 1
            if depth < 0:
                raise bad
        elif token == ",":
            continue
        else:
            word = token.lower().lstrip("+-")
            try:
                x = float(token)
            except ValueError:
                raise bad from None
            if not math.isfinite(x) and word not in TYPED_NONFINITE:  # 1e999: a typing slip, not a value
                raise UsageError(msg("--expect {text}: {token} is too big for a number (NaN and the infinities are written nan, inf, -inf)",
                                     text=repr(text), token=token))
            numbers.append(x)
    if depth != 0 or not numbers:
        raise bad
    return numbers


def check(path: str, stage: str, expect: str, pos: int = 0, batch: int = 0, precision: int = 6) -> Verdict:
    """Run the spec and compare one stage's value at (batch, pos) with the expected numbers."""
    from tracer.compare.hints import spec_blind_spots
    from tracer.engine import executor
    from tracer.engine.params import load_params
    from tracer.front.prepare import prepare

    numbers = parse_expect(expect)
    ready = prepare(path, record="all", stages=[stage], batch=batch, pos=pos)
    ready.check_memory()
    s, policy, b, t = ready.spec, ready.policy, ready.batch, ready.pos
    name = (ready.stages or [stage])[0]
    params = load_params(s, for_run=True)
    trace = executor.run(s, policy=policy, params=params)
    if name not in trace.stages and trace.violations and all(v.kind == "nonfinite" for v in trace.violations):
        trace = executor.run(s, keep_going=True, policy=policy, params=params)  # NaN carried on: the stage's value is NaN
    if name not in trace.stages:
        first = trace.violations[0] if trace.violations else None
        stopped = msg("{kind} violation at stage {stage}", kind=kind_word(first.kind), stage=first.stage) if first else msg("the end of the run")
        return Verdict(False, msg("cannot check {stage} at b={b}, t={t}: the run stopped at a {stopped} before reaching it (tracer run {path})",
                                  stage=name, b=b, t=t, stopped=stopped, path=path))
    actual = [float(x) for x in trace.stages[name].at(b, t).ravel()]
    shape = trace.stages[name].shape_label
    if len(actual) != len(numbers):
        raise UsageError(msg("--expect {text}: {stage} at b={b}, t={t} has {n} numbers (the stage is {shape}); you gave {m}", text=repr(expect),
                             stage=name, b=b, t=t, n=len(actual), shape=shape, m=len(numbers)))
    wrong = _wrong(actual, numbers, precision)
    notes: list[Message] = []
    shown = actual
    if wrong and s.dtype in NARROW:  # the exact value: the same spec in float64 (a hand computation is exact)
        exact_spec = s._replace(dtype="float64")
        exact = executor.run(exact_spec, keep_going=bool(trace.violations), policy=policy, params=load_params(exact_spec, for_run=True))
        if name in exact.stages:
            exact_values = [float(x) for x in exact.stages[name].at(b, t).ravel()]
            still = [i for i in wrong if i in _wrong(exact_values, numbers, precision)]
            if not still:
                notes.append(msg("the spec computes in {dtype}, whose value rounds otherwise at {p} decimals; your numbers are the exact "
                                 "value's (the spec in float64), and right", dtype=s.dtype, p=precision))
                shown = exact_values
            wrong = still
    if not wrong:
        first = _first_nonfinite(trace)
        if first is not None and not all(math.isfinite(x) for x in actual):
            notes.append(msg("where the NaN or infinite values began: {why}", why=first.message))
        # right, but a hand computation with a classic mistake may be right too on this spec: say which it cannot show
        return Verdict(True, msg("right: {stage} at b={b}, t={t} is {v} to {p} decimals", stage=name, b=b, t=t, v=_rounded(shown, precision), p=precision),
                       tuple(notes) + tuple(spec_blind_spots(s, params, trace.stages)))
    which = ", ".join(str(i) for i in wrong)
    if len(wrong) == 1:
        return Verdict(False, msg("wrong: {stage} at b={b}, t={t}: entry {i} of {v} differs at {p} decimals (counting from 0)", stage=name, b=b, t=t,
                                  i=which, v=_shown(numbers), p=precision))
    return Verdict(False, msg("wrong: {stage} at b={b}, t={t}: entries {i} of {v} differ at {p} decimals (counting from 0)", stage=name, b=b, t=t,
                              i=which, v=_shown(numbers), p=precision))


def _wrong(actual: list[float], numbers: list[float], precision: int) -> list[int]:
    """The entries that do not round to the stage's value at ``precision`` decimals (NaN right where NaN is, an infinity
    where the same one is)."""
    half = 0.5 * 10.0 ** -precision
    out = []
    for i, (x, y) in enumerate(zip(actual, numbers)):
        if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
            right = (math.isnan(x) and math.isnan(y)) or x == y
        else:
            right = abs(x - y) <= half * (1 + 1e-9) + 1e-12
        if not right:
            out.append(i)
    return out


def _first_nonfinite(trace: Any) -> Any:
    """The run's first nonfinite violation (its stage and why), or None."""
    return next((v for v in trace.violations if v.kind == "nonfinite"), None)


def _rounded(numbers: list[float], precision: int) -> str:
    """The stage's value as `tracer run --precision P` prints it, every entry: the right answer to the decimals claimed."""
    from tracer.views.text import fmt_number

    return "[" + ", ".join(fmt_number(x, precision) for x in numbers) + "]"


def _shown(numbers: list[float]) -> str:
    """The numbers given, as given: each the shortest decimal that reads back to it (never cut to a few digits)."""
    return "[" + ", ".join(_given(x) for x in numbers) + "]"


def _given(x: float) -> str:
    text = repr(x)
    return text[:-2] if text.endswith(".0") else text


# -- --answers FILE: many answers checked at once ------------------------------------------------

class Answer(NamedTuple):
    stage: str
    batch: int
    pos: int
    expect: str  # as --expect takes it
    where: str  # FILE:LINE:COL of its key
    refused: Message | None = None  # the key or value cannot be an answer: its own line, the others still checked


class Checked(NamedTuple):
    """One answer's outcome: its verdict, or the error that refused it (a bad stage, count or number)."""

    answer: Answer
    code: int
    verdict: Verdict | None = None
    error: str = ""

    @property
    def word(self) -> str:
        if self.verdict is None:
            return "error"
        return "right" if self.verdict.right else "wrong"

    def as_json(self, spec: str) -> dict[str, Any]:
        return answer_json(spec, self.answer.stage, self.answer.batch, self.answer.pos, self.verdict, self.code, self.error)


def answer_json(spec: str, stage: str, batch: int, pos: int, verdict: Verdict | None, code: int, error: object = "") -> dict[str, Any]:
    """One checked answer as JSON (English, as every JSON of tracer's): right, or the error that refused it."""
    return {"kind": "check", "spec": spec, "stage": stage, "batch": batch, "pos": pos,
            "right": None if verdict is None else verdict.right, "exit_code": code,
            "message": " ".join(str(verdict.line if verdict is not None else error).split()),
            "notes": [] if verdict is None else [" ".join(str(n).split()) for n in verdict.notes],
            "error": None if verdict is not None else {"exit_code": code, "message": " ".join(str(error).split())}}


_ANSWER_KEY = re.compile(r"(?P<stage>[^@\s]+)(?:@(?:(?P<b>-?\d+)\s*,\s*)?(?P<t>-?\d+))?")


def read_answers(path: str, batch: int = 0, pos: int = 0) -> list[Answer]:
    """An answers file: a YAML (or JSON) mapping, one answer a key: `STAGE` (at --pos, --batch), `STAGE@T` or `STAGE@B,T`,
    each the numbers as a list or as --expect takes them (`pre@1: [-1, 2, 1]`, `norm: "[-0.999995  0.999995]"`, `x: [.nan, 1]`).
    A key or value that cannot be an answer is an answer refused (its own line when checked), not the file's end."""
    import yaml

    from tracer.errors import SpecError
    from tracer.spec import yamlio

    example = "'pre@0: [1, -2, -1]'"
    try:
        text = yamlio.read_text(path)
    except SpecError:
        if os.path.isfile(path) and os.path.getsize(path) < 4096 and not Path(path).read_bytes().strip():
            raise UsageError(msg("{path}: is empty; expected a mapping of answers such as {example}", path=path, example=example)) from None
        raise
    if not text.strip():
        raise UsageError(msg("{path}: is empty; expected a mapping of answers such as {example}", path=path, example=example))
    try:
        top = yaml.safe_load(text)
    except yaml.YAMLError:
        top = {}  # the spec reader below says where the YAML is broken
    if not isinstance(top, dict):
        raise UsageError(msg("{path}: holds {kind}; expected a mapping of answers such as {example}", path=path,
                             kind=msg("a list") if isinstance(top, list) else msg("a single value"), example=example))
    doc, src = yamlio.load(text, path)
    answers = []
    for key, value in doc.items():
        where = src.where_key((key,))
        m = _ANSWER_KEY.fullmatch(str(key))
        if m is None:
            answers.append(Answer(str(key), batch, pos, "", where,
                                  msg("{where}: {key}: expected STAGE, STAGE@T or STAGE@B,T (such as pre@1)", where=where, key=repr(key))))
            continue
        b = int(m.group("b")) if m.group("b") is not None else batch
        t = int(m.group("t")) if m.group("t") is not None else pos
        expect = _as_expect(value)
        if expect is None:
            answers.append(Answer(m.group("stage"), b, t, "", where,
                                  msg("{where}: {key}: expected a list of numbers such as [1, -2, -1]", where=src.where((key,)), key=key)))
            continue
        answers.append(Answer(m.group("stage"), b, t, expect, where))
    if not answers:
        raise UsageError(msg("{path}: no answers (expected a mapping such as 'pre@0: [1, -2, -1]')", path=path))
    return answers


def _as_expect(value: object) -> str | None:
    """An answer's value as --expect reads it: a list (nested: row by row) of numbers, or of the words nan and inf that
    YAML reads as text; a number; a string as typed.  None: not an answer (a mapping, true, null)."""
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        parts = [_as_expect(v) for v in value]
        return None if any(p is None for p in parts) else "[" + ", ".join(str(p) for p in parts) + "]"
    return None


def check_answers(path: str, answers: list[Answer], precision: int = 6) -> list[Checked]:
    """Each answer checked as `tracer check --stage --expect` would; a refused answer is its own outcome, the rest go on."""
    from tracer.errors import TracerError
    from tracer.messages import at

    out = []
    for a in answers:
        if a.refused is not None:
            out.append(Checked(a, EXIT_USAGE, error=a.refused))
            continue
        try:
            v = check(path, a.stage, a.expect, a.pos, a.batch, precision)
            out.append(Checked(a, v.exit_code, v))
        except TracerError as e:
            out.append(Checked(a, e.exit_code, error=at(a.where, e.message)))
    return out
