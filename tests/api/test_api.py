"""The Python API: tracer.load, tracer.trace, tracer.diff, tracer.recorder (docs/api.md)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import BOOK_Y, EXAMPLES, POST, PRE, REPO, run_app
from helpers import oracle
from rich.console import Console

import tracer
from tracer.views import display

# specs/ch17-prenorm.yaml as a Python dict, written out here (not read from the file)
PRE_DICT = {
    "name": "Example 17.2, pre-norm",
    "dims": {"B": 1, "T": 3, "C": 2, "H": 2, "F": 3},
    "block": {"norm_order": "pre", "mask": "causal", "eps": 1e-5, "final_norm": False},
    "input": {"tokens": [0, 1, 2]},
    "weights": {
        "embedding": np.array([[1, 0], [0, 1], [1, 1]]),
        "position": [[0, 0], [0, 1], [1, 0]],
        "attn": {"w_q": "identity", "w_k": "identity", "w_v": "identity", "w_o": ((1, 1), (1, -1))},
        "ffn": {"w1": [[1, -1, 0], [0, 1, 1]], "b1": "zeros", "w2": [[1, 0], [0, 1], [1, -1]], "b2": "zeros"},
        "norm1": {"gamma": "ones", "beta": "zeros"},
        "norm2": {"gamma": "ones", "beta": "zeros"},
    },
}


def lines(text: str) -> list[str]:
    """The text's lines without trailing blanks (a recorded console pads lines to its width)."""
    return [line.rstrip() for line in text.strip().splitlines()]


def table_17_1_y() -> np.ndarray:
    """Y of Example 17.2 from tests/helpers/oracle.py (the chapter's formulas, written independently of tracer)."""
    x = (np.array([[1.0, 0], [0, 1], [1, 1]]) + np.array([[0.0, 0], [0, 1], [1, 0]]))[None]
    W = {"norm1": {"gamma": np.ones(2), "beta": np.zeros(2)}, "norm2": {"gamma": np.ones(2), "beta": np.zeros(2)},
         "attn": {"w_q": np.eye(2), "w_k": np.eye(2), "w_v": np.eye(2), "w_o": np.array([[1.0, 1], [1, -1]]),
                  **{f"b_{n}": np.zeros(2) for n in "qkvo"}},
         "ffn": {"w1": np.array([[1.0, -1, 0], [0, 1, 1]]), "b1": np.zeros(3), "w2": np.array([[1.0, 0], [0, 1], [1, -1]]),
                 "b2": np.zeros(2)}}
    return oracle.pre_norm(x, W, 2, 1e-5, oracle.causal(3))


# -- the chapter's Y through the API ----------------------------------------------------------------

def test_trace_output_is_table_17_1s_y():
    y = tracer.trace(PRE)["output"]
    np.testing.assert_allclose(y, table_17_1_y(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(y[0], BOOK_Y, rtol=0, atol=5e-7)  # the chapter's Y, six decimals


def test_a_dict_spec_gives_the_same_trace_as_its_yaml():
    from_yaml, from_dict = tracer.trace(PRE), tracer.trace(PRE_DICT)
    assert list(from_yaml) == list(from_dict)
    for name in from_yaml:
        np.testing.assert_array_equal(from_yaml[name], from_dict[name])
        assert from_yaml.shape_of(name) == from_dict.shape_of(name)
    assert tracer.load(PRE_DICT).spec.steps == tracer.load(PRE).spec.steps


def test_errors_raise_and_do_not_exit(tmp_path):
    bad = {**PRE_DICT, "dims": {"C": 2, "H": "two", "F": 3}}
    with pytest.raises(tracer.SpecError) as e:
        tracer.load(bad)
    assert str(e.value) == "<dict>: dims.H: expected a whole number, received text 'two'"
    (tmp_path / "bad.yaml").write_text("dims: {C: 2, H: two, F: 3}\ninput: {tokens: [0]}\n", encoding="utf-8")
    with pytest.raises(tracer.SpecError) as from_file:
        tracer.trace(str(tmp_path / "bad.yaml"))
    assert str(from_file.value).endswith(": dims.H: expected a whole number, received text 'two'")  # the same words
    r = run_app("run", str(tmp_path / "bad.yaml"))
    assert r.stderr.strip() == f"tracer: error: {from_file.value}"  # the CLI's message, word for word
    for call in (lambda: tracer.trace("no/such.yaml"), lambda: tracer.trace(PRE, pos=7), lambda: tracer.trace(PRE, record="some"),
                 lambda: tracer.diff(PRE, PRE, atol=-1), lambda: tracer.trace(PRE)["nrom1"], lambda: tracer.load(42)):  # type: ignore[arg-type]
        with pytest.raises(tracer.TracerError):
            call()


def test_dict_errors_name_the_field_path():
    weights = {**PRE_DICT["weights"], "attn": {**PRE_DICT["weights"]["attn"], "w_o": [[1, 2, 3], [4, 5, 6]]}}
    with pytest.raises(tracer.SpecError, match=r"^<dict>: weights\.attn\.w_o: expected \[C,C\] = \[2,2\], received \[2,3\]"):
        tracer.load({**PRE_DICT, "weights": weights})
    with pytest.raises(tracer.SpecError, match=r"^<dict>: weights\.attn: keys must be text, received 1"):
        tracer.load({**PRE_DICT, "weights": {"attn": {1: "identity"}}})
    with pytest.raises(tracer.SpecError, match=r"^block: dims: missing dimension"):
        tracer.load({"dims": {"C": 2}, "input": {"tokens": [0]}}, name="block")


def test_import_tracer_loads_no_numpy():
    probe = ("import sys, tracer\nassert 'numpy' not in sys.modules, 'import'\n"
             f"from tracer.spec.loading import load\ns = load({PRE!r})\nassert 'numpy' not in sys.modules, 'validating a spec'\n"
             "print(sorted(tracer.__all__))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "'diff', 'load', 'patch', 'recorder'" in r.stdout


# -- Trace -------------------------------------------------------------------------------------------

def test_trace_is_a_mapping_of_stages():
    t = tracer.trace(PRE)
    assert list(t)[:4] == ["embed", "position", "x", "norm1"] and len(t) == 16 and "attn.weights" in t
    assert str(t.shape_of("attn.weights")) == "[B,H,T,T] = [1,2,3,3]" and t.shape_of("hidden").size("F") == 3
    assert t.ok and t.violations == []
    assert isinstance(t["norm1"], np.ndarray) and t["norm1"].shape == (1, 3, 2)
    with pytest.raises(KeyError) as e:
        t["nrom1"]
    assert "did you mean 'norm1'" in str(e.value) and isinstance(e.value, tracer.TracerError)


def test_violations_are_kept_not_raised():
    t = tracer.trace(EXAMPLES / "violations" / "beta-typo.yaml")
    assert not t.ok and [v.kind for v in t.violations] == ["broadcast"] and t.violations[0].stage == "norm1"
    assert "broadcast violation at norm1" in repr(t)


def test_to_json_is_the_cli_json():
    assert tracer.trace(PRE).to_json() == run_app("run", PRE, "--json").stdout
    assert tracer.trace(PRE).to_json(show_all=True, with_weights=True) == run_app("run", PRE, "--json", "--all", "--with-weights").stdout


def test_save_writes_the_cli_archive(tmp_path):
    tracer.trace(PRE).save(str(tmp_path / "api.npz"))
    assert run_app("run", PRE, "--save", str(tmp_path / "cli.npz")).returncode == 0
    with np.load(tmp_path / "api.npz") as a, np.load(tmp_path / "cli.npz") as b:
        assert a.files == b.files
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k])
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(tracer.UsageError, match="not an NPZ file"):
        tracer.trace(PRE).save(str(tmp_path / "notes.txt"))
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_the_notebook_shows_the_terminals_table():
    t = tracer.trace(PRE)
    cli = run_app("run", PRE).stdout
    assert lines(display.text(t.table())) == lines(cli)
    html = t._repr_html_()
    assert html.startswith("<pre") and "Example 17.2, pre-norm" in html and "1.476742" in html
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(t)  # __rich__
    assert "block output, Y = R + FFN(N_2)" in console.export_text()


def test_attention_returns_the_heatmap_view():
    view = tracer.trace(PRE).attention()
    assert lines(display.text(view)) == lines(run_app("run", PRE, "--attention").stdout)
    with pytest.raises(tracer.UsageError):
        tracer.trace(PRE).attention("nope")


# -- diff ----------------------------------------------------------------------------------------------

def test_diff_any_two_sides():
    t = tracer.trace(PRE)
    assert tracer.diff(t, PRE).exit_code == 0 and tracer.diff(PRE_DICT, t).same
    d = tracer.diff(PRE, POST)
    assert d.exit_code == 1 and d.first_divergence is not None and d.first_divergence.stage == "norm1"
    assert d.to_json() == run_app("diff", PRE, POST, "--json").stdout
    assert lines(display.text(d.table())) == lines(run_app("diff", PRE, POST).stdout)
    assert "<pre" in d._repr_html_()


def test_diff_against_a_mapping_of_arrays_with_names():
    mine = {("ln1" if k == "norm1" else k): v for k, v in oracle.chapter_block(["ddof"]).items()}
    d = tracer.diff(PRE, mine, names={"ln1": "norm1"})
    first = d.first_divergence
    assert d.exit_code == 1 and first is not None and first.stage == "norm1"
    assert first.where is not None and set(first.where) == {"b", "t", "c"}
    assert first.value_a == pytest.approx(tracer.trace(PRE)["norm1"][tuple(first.where.values())])
    assert first.hint is not None and "ddof=1" in first.hint and d.hint == first.hint
    rows = {r.stage: r for r in d.stages}
    assert rows["x"].status == "equal" and rows["embed"].status == "not_recorded" and rows["norm1"].shape_b == "[B,T,C] = [1,3,2]"


# -- recorder ------------------------------------------------------------------------------------------

def test_recorder_writes_an_archive_tracer_diff_reads(tmp_path):
    path = tmp_path / "mine.npz"
    arrays = oracle.chapter_block()
    with tracer.recorder(path) as rec:
        for name, a in arrays.items():
            assert rec(name, a) is a  # an identity wrap
    with np.load(path) as z:
        assert z.files == list(arrays)
        np.testing.assert_array_equal(z["norm1"], arrays["norm1"])
    assert run_app("diff", PRE, str(path)).returncode == 0
    assert sorted(os.listdir(tmp_path)) == ["mine.npz"]  # no temporary file left


def test_recorder_keeps_the_value_at_record_time(tmp_path):
    x = np.zeros(3)
    with tracer.recorder(tmp_path / "m.npz") as rec:
        rec("x", x)
        x += 1
    with np.load(tmp_path / "m.npz") as z:
        assert z["x"].tolist() == [0, 0, 0]


def test_an_exception_in_the_block_writes_nothing_and_keeps_the_old_archive(tmp_path):
    path = tmp_path / "mine.npz"
    with tracer.recorder(path) as rec:
        rec("x", np.ones(2))
    before = path.read_bytes()
    with pytest.raises(ValueError) as e, tracer.recorder(path) as rec:
        rec("x", np.zeros(2))
        raise ValueError("shapes (3,2) and (3,2) not aligned")
    assert path.read_bytes() == before and rec.arrays["x"].tolist() == [0, 0]
    if sys.version_info >= (3, 11):
        assert "nothing was written" in "".join(e.value.__notes__)
    assert sorted(os.listdir(tmp_path)) == ["mine.npz"]


def test_recorder_never_overwrites_another_file(tmp_path):
    notes = tmp_path / "notes.npz"
    notes.write_text("my notes", encoding="utf-8")
    ran = []
    with pytest.raises(tracer.UsageError, match="not an .npz archive; refusing to overwrite"), tracer.recorder(notes):
        ran.append(1)  # refused before the block runs
    assert ran == [] and notes.read_text(encoding="utf-8") == "my notes"
    (tmp_path / "real.npz").write_bytes(b"")
    os.symlink(tmp_path / "real.npz", tmp_path / "link.npz")
    with pytest.raises(tracer.UsageError, match="not a regular file"), tracer.recorder(tmp_path / "link.npz"):
        pass
    with pytest.raises(tracer.UsageError, match="does not exist"), tracer.recorder(tmp_path / "no" / "m.npz"):
        pass


@pytest.mark.parametrize("calls, fragment", [
    ([("x", np.ones(2)), ("x", np.ones(2))], "'x' is recorded twice"),
    ([("x", np.array(["a"]))], "not an array of numbers"),
    ([("", np.ones(2))], "a stage name is text"),
    ([], "nothing was recorded"),
])
def test_recorder_refuses_mistakes(tmp_path, calls, fragment):
    with pytest.raises(tracer.UsageError, match=fragment), tracer.recorder(tmp_path / "m.npz") as rec:
        for name, a in calls:
            rec(name, a)
    assert not (tmp_path / "m.npz").exists()


def test_recorder_takes_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is in the optional extra")
    with tracer.recorder(tmp_path / "t.npz") as rec:
        rec("x", torch.ones(2, 2, requires_grad=True) * 2)
    with np.load(tmp_path / "t.npz") as z:
        assert z["x"].tolist() == [[2, 2], [2, 2]]


# -- types: a user's code type-checks against the public surface ---------------------------------------

@pytest.mark.slow  # a whole mypy run (about 5 s)
def test_a_users_code_is_mypy_clean(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent(f"""
        import numpy as np
        import tracer

        t: tracer.Trace = tracer.trace({PRE!r}, pos=1)
        y: np.ndarray = t["output"]
        label: str = str(t.shape_of("norm1"))
        d: tracer.Diff = tracer.diff(t, {{"norm1": y}}, names={{"a": "norm1"}}, atol=1e-6)
        code: int = d.exit_code
        first = d.first_divergence
        stage: str = first.stage if first is not None else ""
        with tracer.recorder("m.npz") as rec:
            rec("x", y)
        try:
            tracer.load({{"dims": {{}}}})
        except tracer.TracerError as e:
            print(e)
    """), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", str(user)], cwd=tmp_path,
                       env=dict(os.environ, MYPYPATH=str(REPO)), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_package_ships_its_type_marker():
    assert (REPO / "tracer" / "py.typed").is_file()
    assert json.dumps(tracer.__all__)  # documented names
    for name in tracer.__all__:
        assert getattr(tracer, name) is not None
