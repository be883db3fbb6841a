"""Every validation rule of tracer/spec.py and tracer/yamlio.py, through the command line.

Each bad spec must exit 2 with one line on stderr, `tracer: error: FILE:LINE:COL: FIELD: message`,
nothing on stdout and no traceback.  Specs NumPy could run but that break a contract (beta: [0])
are not spec errors: they run and exit 1.

Every case goes through the typer app in process (the same `guarded()` exit path, fast); a sample
of them also goes through the installed `tracer` command in a fresh process.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import PRE_TEXT, load_text, run_app, run_cli, write_spec

from tracer.errors import SpecError

CH17 = PRE_TEXT


def run_spec(tmp_path, text, name="spec.yaml"):
    """The installed command on a spec written to tmp_path (run from there, so messages say spec.yaml)."""
    write_spec(tmp_path, text, name)
    return run_cli("run", name, cwd=tmp_path)


def run_spec_in_process(tmp_path, text, name="spec.yaml"):
    write_spec(tmp_path, text, name)
    return run_app("run", name, cwd=tmp_path)


def check_spec_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("tracer: error: "), r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    for f in fragments:
        assert f in r.stderr, (f, r.stderr)
    return r.stderr


def test_wrong_weight_shape_exact_format(tmp_path):
    text = CH17.replace("w1: [[1, -1, 0], [0, 1, 1]]", "w1: [[1, 0], [-1, 1], [0, 1]]")
    lines = text.splitlines()
    line = next(i for i, ln in enumerate(lines, 1) if "w1:" in ln)
    col = lines[line - 1].index("[[") + 1
    err = check_spec_error(run_spec(tmp_path, text))
    assert err == f"tracer: error: spec.yaml:{line}:{col}: weights.ffn.w1: expected [C,F] = [2,3], received [3,2]\n"
    assert (line, col) == (20, 9)


MIN = "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n"

CASES = [
    # -- sections and keys ---------------------------------------------------------------------
    ("missing dims", "input: {tokens: [0, 1]}\nseed: 0\n",
     ["spec.yaml:1:1: (document): missing required section 'dims'"]),
    ("missing input", "dims: {C: 2, H: 2, F: 3}\nseed: 0\n",
     ["(document): missing required section 'input'"]),
    ("missing dimension F", "dims: {C: 2, H: 2}\ninput: {tokens: [0, 1]}\nseed: 0\n",
     ["spec.yaml:1:7: dims: missing dimension F"]),
    ("unknown top key suggests", MIN + "blok: {mask: causal}\n",
     ["blok: unknown key 'blok'; did you mean 'block'?"]),
    ("unknown key lists known keys", MIN + "zzz: 1\n",
     ["zzz: unknown key 'zzz'; known keys: name, description, model, vocab, dims, block, encoder, decoder, input, weights, seed, init, "
      "dtype, allow_nonfinite"]),
    ("unknown dims key", "dims: {C: 2, H: 2, F: 3, Tmax: 4}\ninput: {tokens: [0, 1]}\nseed: 0\n",
     ["dims.Tmax: unknown key 'Tmax'; did you mean 'T_max'?"]),
    ("unknown block key", MIN + "block: {normorder: pre}\n",
     ["block.normorder: unknown key 'normorder'; did you mean 'norm_order'?"]),
    ("unknown weight group", MIN + "weights: {atn: {}}\n",
     ["weights.atn: weight group 'atn' is given but nothing in the model reads it; did you mean 'attn'?"]),
    ("unknown weight in group", MIN + "weights:\n  attn: {wq: identity}\n",
     ["spec.yaml:5:10: weights.attn.wq: unknown key 'wq'; did you mean 'w_q'?"]),
    ("unknown input key", "dims: {C: 2, H: 2, F: 3}\ninput: {token: [0, 1]}\nseed: 0\n",
     ["input.token: unknown key 'token'; did you mean 'tokens'?"]),
    ("duplicate top key", "dims: {C: 2, H: 2, F: 3}\ndims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0]}\n",
     ["spec.yaml:2:1: dims: duplicate key (first given at line 1)"]),
    ("duplicate nested key", "dims: {C: 2, H: 2, F: 3, H: 1}\ninput: {tokens: [0]}\nseed: 0\n",
     ["spec.yaml:1:26: dims.H: duplicate key (first given at line 1)"]),
    ("section not a mapping", MIN + "block: [pre]\n",
     ["block: expected a mapping of block settings, received a list"]),
    ("weight group not a mapping", MIN + "weights: {ffn: [1, 2]}\n",
     ["weights.ffn: expected a mapping of ffn weights, received a list"]),
    # -- YAML itself -----------------------------------------------------------------------------
    ("python object tag", "dims: !!python/object:os.system {C: 2, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n",
     ["spec.yaml:1:7: dims: the tag 'tag:yaml.org,2002:python/object:os.system' is not allowed"]),
    ("python apply tag", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: !!python/object/apply:os.system [echo hi]}\n",
     ["input.tokens: the tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"]),
    ("syntax error", "dims: {C: 2, H: 2, F: 3\ninput: [\n", ["spec.yaml:2:6: YAML syntax error"]),
    ("document is a list", "- dims\n- input\n", ["the document is a list"]),
    ("merge key", "base: &b {C: 2, H: 2, F: 3}\ndims:\n  <<: *b\n", ["merge keys '<<' are not supported"]),
    ("empty file", "", ["spec.yaml: is empty"]),
    # -- dims --------------------------------------------------------------------------------------
    ("H does not divide C", "dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n",
     ["spec.yaml:1:17: dims.H: H = 2 must divide C = 3 (each head has width d = C / H)"]),
    ("dimension not whole", "dims: {C: 2.5, H: 1, F: 3}\ninput: {tokens: [0]}\nseed: 0\n",
     ["dims.C: expected a whole number, received 2.5"]),
    ("dimension zero", "dims: {C: 2, H: 2, F: 0}\ninput: {tokens: [0]}\nseed: 0\n",
     ["dims.F: expected a whole number from 1 to 10,000,000, received 0"]),
    ("dimension yes", "dims: {C: yes, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n",
     ["spec.yaml:1:11: dims.C: expected a whole number, received boolean 'yes'"]),
    ("T mismatch", "dims: {C: 2, H: 2, F: 3, T: 4}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n",
     ["spec.yaml:1:29: dims.T: T = 4 but the input has T = 3"]),
    ("B mismatch", "dims: {B: 2, C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n",
     ["dims.B: B = 2 but the input has B = 1"]),
    ("embedding rows vs V", "dims: {C: 2, H: 2, F: 3, V: 3}\ninput: {tokens: [0]}\nweights: {embedding: [[1, 0], [0, 1]]}\nseed: 0\n",
     ["weights.embedding: table has 2 rows but dims.V = 3"]),
    ("V needed to draw", "dims: {C: 2, H: 2, F: 3, T: 2}\ninput: {tokens: random}\nseed: 0\n",
     ["dims: dims.V is needed to draw weights.embedding from the seed"]),
    # -- top-level fields ----------------------------------------------------------------------------
    ("seed negative", MIN.replace("seed: 0", "seed: -1"), ["seed: expected a whole number from 0 to"]),
    ("seed yes", MIN.replace("seed: 0", "seed: yes"), ["seed: expected a whole number, received boolean 'yes'"]),
    ("dtype", MIN + "dtype: float16\n", ["dtype: expected one of float64 | float32, received text 'float16'"]),
    ("allow_nonfinite", MIN + "allow_nonfinite: maybe\n", ["allow_nonfinite: expected true or false, received text 'maybe'"]),
    ("name not text", MIN + "name: [a]\n", ["name: expected text, received a list"]),
    # -- block -------------------------------------------------------------------------------------
    ("norm_order", MIN + "block: {norm_order: middle}\n",
     ["block.norm_order: expected one of pre | post | parallel | parallel_shared | sandwich | post_sublayer, received text 'middle'"]),
    ("mask", MIN + "block: {mask: full}\n", ["block.mask: expected one of causal | none, received text 'full'"]),
    ("a window of 0", MIN + "block: {mask: {causal: true, window: 0}}\n",
     ["spec.yaml:4:38: block.mask.window: expected a whole number from 1 to 10,000,000, received 0"]),
    ("a window of 2.5", MIN + "block: {mask: {causal: true, window: 2.5}}\n", ["block.mask.window: expected a whole number, received 2.5"]),
    ("a window as text", MIN + "block: {mask: {causal: true, window: four}}\n", ["block.mask.window: expected a whole number, received text 'four'"]),
    ("a window without causal", MIN + "block: {mask: {window: 2}}\n", ["spec.yaml:4:15: block.mask: expected {causal: true, window: W}, received no causal"]),
    ("a window not causal", MIN + "block: {mask: {causal: false, window: 2}}\n",
     ["spec.yaml:4:24: block.mask.causal: expected true (a sliding window is causal", "received boolean 'false'"]),
    ("an unknown mask key", MIN + "block: {mask: {causal: true, widow: 2}}\n", ["block.mask.widow: unknown key 'widow'", "window"]),
    ("eps yes", MIN + "block: {eps: yes}\n",
     ["spec.yaml:4:14: block.eps: expected a positive number such as 1e-5, received boolean 'yes'"]),
    ("eps zero", MIN + "block: {eps: 0}\n", ["block.eps: expected a positive number such as 1e-5, received 0"]),
    ("eps negative", MIN + "block: {eps: -1e-5}\n", ["block.eps: expected a positive number such as 1e-5, received -1e-5"]),
    ("eps infinite", MIN + "block: {eps: .inf}\n", ["block.eps: expected a positive number"]),
    ("eps text", MIN + "block: {eps: small}\n", ["block.eps: expected a positive number such as 1e-5, received text 'small'"]),
    ("final_norm not bool", MIN + "block: {final_norm: 1}\n", ["block.final_norm: expected true or false, received 1"]),
    ("positions", MIN + "block: {positions: absolute}\n", ["block.positions: expected one of learned | sinusoidal | rotary | none"]),
    # -- input -------------------------------------------------------------------------------------
    ("both tokens and x", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0], x: [[1, 2]]}\nseed: 0\n",
     ["input: give exactly one of tokens"]),
    ("no tokens nor x", "dims: {C: 2, H: 2, F: 3}\ninput: {}\nseed: 0\n", ["input: give exactly one of tokens"]),
    ("token id out of range", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 5]}\nweights: {embedding: [[1, 0], [0, 1]]}\nseed: 0\n",
     ["spec.yaml:2:17: input.tokens: token id 5 is out of range: the embedding table has V = 2 rows (ids 0 to 1)"]),
    ("token id negative", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, -1]}\nseed: 0\n",
     ["input.tokens[1]: token ids must be 0 or more, received -1"]),
    ("token id not whole", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1.5]}\nseed: 0\n",
     ["spec.yaml:2:21: input.tokens[1]: expected a whole number (token id), received 1.5"]),
    ("token id yes", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, yes]}\nseed: 0\n",
     ["input.tokens[1]: expected a whole number (token id), received boolean 'yes'"]),
    ("tokens nested too deep", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [[[0]]]}\nseed: 0\n",
     ["input.tokens: expected a list of token ids [T] or one list per sample [B,T]"]),
    ("ragged tokens", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [[0, 1], [1]]}\nseed: 0\n",
     ["input.tokens[1]: ragged: row 1 has shape [1] but row 0 has [2]"]),
    ("x wrong width", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 2, 3]]}\nseed: 0\n",
     ["input.x: expected rows of width C = 2, received rows of width 3"]),
    ("x is a vector", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [1, 2]}\nseed: 0\n",
     ["input.x: expected a [T,C] or [B,T,C] matrix"]),
    ("x not finite", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, .nan]]}\nseed: 0\n",
     ["input.x[0][1]: received nan (not finite); add allow_nonfinite: true"]),
    ("random input without seed", "dims: {C: 2, H: 2, F: 3, T: 2}\ninput: {x: random}\n",
     ["input.x: 'random' input needs a seed (add seed: 0)"]),
    ("random input without T", "dims: {C: 2, H: 2, F: 3}\ninput: {x: random}\nseed: 0\n",
     ["dims: 'random' input needs dims.T"]),
    ("embedding with x input", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 2]]}\nweights: {embedding: [[1, 0]]}\nseed: 0\n",
     ["weights.embedding: an embedding table is given but the input is x, not tokens"]),
    # -- weights -----------------------------------------------------------------------------------
    ("missing weight without seed",
     CH17.replace(", w_o: [[1, 1], [1, -1]]", ""),
     ["weights.attn.w_o: missing weight attn.w_o [C,C] = [2,2], and there is no seed to draw it from"]),
    ("missing table without seed", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1]}\n",
     ["weights.embedding: missing weight embedding [V,C] = [2,2], and there is no seed"]),
    ("identity on a non-square matrix", MIN + "weights:\n  ffn: {w1: identity}\n",
     ["spec.yaml:5:13: weights.ffn.w1: identity needs a square matrix, but ffn.w1 is [C,F] = [2,3]"]),
    ("unknown keyword", MIN + "weights:\n  attn: {w_q: eye}\n",
     ["weights.attn.w_q: expected one of identity | zeros | ones | random, received text 'eye'"]),
    ("random weight without seed", CH17.replace("w_o: [[1, 1], [1, -1]]", "w_o: random"),
     ["weights.attn.w_o: 'random' needs a seed (add seed: 0)"]),
    ("ragged matrix", MIN + "weights:\n  attn: {w_o: [[1, 1], [1]]}\n",
     ["spec.yaml:5:24: weights.attn.w_o[1]: ragged: row 1 has shape [1] but row 0 has [2]"]),
    ("boolean in a matrix", MIN + "weights:\n  attn: {w_o: [[1, yes], [1, 1]]}\n",
     ["spec.yaml:5:20: weights.attn.w_o[0][1]: expected a number, received boolean 'yes'"]),
    ("text in a matrix", MIN + "weights:\n  attn: {w_o: [[1, a], [1, 1]]}\n",
     ["weights.attn.w_o[0][1]: expected a number, received text 'a'"]),
    ("empty list", MIN + "weights:\n  ffn: {b1: []}\n", ["weights.ffn.b1: expected numbers, received an empty list"]),
    ("wrong matrix shape", MIN + "weights:\n  attn: {w_q: [[1, 0, 0], [0, 1, 0]]}\n",
     ["weights.attn.w_q: expected [C,C] = [2,2], received [2,3]"]),
    ("scalar for a matrix", MIN + "weights:\n  attn: {w_q: 1}\n", ["weights.attn.w_q: expected [C,C] = [2,2], received a single number"]),
    ("vector too long", MIN + "weights:\n  norm1: {beta: [0, 0, 0]}\n", ["weights.norm1.beta: expected [C] = [2], received [3]"]),
    ("matrix for a vector", MIN + "weights:\n  ffn: {b1: [[0, 0, 0]]}\n", ["weights.ffn.b1: expected [F] = [3], received [1,3]"]),
    ("non-finite weight", MIN + "weights:\n  ffn: {b2: [0, .inf]}\n", ["weights.ffn.b2[1]: received inf (not finite)"]),
    ("position width", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0]}\nweights: {position: [[0, 0, 0]]}\nseed: 0\n",
     ["weights.position: expected [T_max,C] = [T_max,2], received [1,3]"]),
    ("position table but positions none", MIN + "block: {positions: none}\nweights: {position: [[0, 0]]}\n",
     ["weights.position: a position table is given but block.positions is none"]),
    ("final_norm weights without final_norm", MIN + "weights:\n  final_norm: {gamma: ones}\n",
     ["weights.final_norm: final_norm weights are given but block.final_norm is false"]),
]


@pytest.mark.parametrize("case_id,text,fragments", CASES, ids=[c[0] for c in CASES])
def test_spec_error(tmp_path, case_id, text, fragments):
    check_spec_error(run_spec_in_process(tmp_path, text), *fragments)
    # the library raises the same message
    with pytest.raises(SpecError) as e:
        load_text(text)
    for f in fragments:
        assert f.replace("spec.yaml", "") in str(e.value)


THROUGH_THE_COMMAND = ["missing dims", "unknown top key suggests", "duplicate top key", "python object tag", "syntax error",
                       "H does not divide C", "dimension yes", "T mismatch", "eps yes", "token id out of range",
                       "missing weight without seed", "identity on a non-square matrix", "ragged matrix", "boolean in a matrix"]


@pytest.mark.slow  # 14 processes; in this process test_spec_error checks every case, test_bad_input the entry point's contract
def test_spec_errors_through_the_installed_command(tmp_path_factory):
    cases = [c for c in CASES if c[0] in THROUGH_THE_COMMAND]
    assert len(cases) == len(THROUGH_THE_COMMAND)

    def one(case):
        return case, run_spec(tmp_path_factory.mktemp("case"), case[1])

    with ThreadPoolExecutor(max_workers=2) as pool:
        for (case_id, _, fragments), r in pool.map(one, cases):
            assert r.returncode == 2, (case_id, r.stderr)
            check_spec_error(r, *fragments)


@pytest.mark.parametrize("content,fragment", [
    (b"dims: {C: 2\x00}", "spec.yaml: is a binary file"),
    (b"dims: {C: 2}\n\xff\n", "spec.yaml:2: is not UTF-8 text"),
])
def test_unreadable_files(tmp_path, content, fragment):
    (tmp_path / "spec.yaml").write_bytes(content)
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr


def test_missing_file_and_directory(tmp_path):
    r = run_app("run", "nope.yaml", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == "tracer: error: nope.yaml: no such file\n"
    r = run_app("run", str(tmp_path))
    assert r.returncode == 2 and "is a directory, expected a YAML spec file" in r.stderr


# -- what is accepted ---------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [("1e-5", 1e-5), ("1E-5", 1e-5), ("5e-6", 5e-6), ("0.00001", 1e-5), ("1", 1.0)])
def test_eps_parses_as_a_number(text, value):
    spec = load_text(MIN + f"block: {{eps: {text}}}\n")
    assert spec.block.eps == value and isinstance(spec.block.eps, float)


def test_eps_in_e_notation_through_the_cli(tmp_path):
    for text, value in (("1e-5", 1e-5), ("1E-5", 1e-5), ("5e-6", 5e-6)):
        write_spec(tmp_path, CH17.replace("eps: 1e-5", f"eps: {text}"))
        r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["block"]["eps"] == value


def test_broadcastable_beta_runs_and_is_a_violation(tmp_path):
    write_spec(tmp_path, CH17.replace("norm1: {gamma: ones, beta: zeros}", "norm1: {gamma: ones, beta: [0]}"))
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "broadcast violation at stage norm1" in r.stdout
    assert "beta has shape [1] where [C] = [2] is due" in r.stdout
    assert "Traceback" not in r.stderr


def test_defaults():
    spec = load_text(MIN)
    assert (spec.block.norm_order, spec.block.mask, spec.block.eps, spec.block.final_norm, spec.block.positions) == \
        ("pre", "causal", 1e-5, False, "none")
    assert (spec.dims.B, spec.dims.T, spec.dims.V, spec.dims.d) == (1, 3, 3, 1)
    assert spec.name == "spec.yaml" and spec.dtype == "float64"
    assert spec.weights["ffn.b1"].source == "zeros" and spec.weights["norm2.gamma"].source == "ones"
    assert spec.weights["attn.w_q"].source == "seed"


def test_dims_follow_from_the_chapter_spec():
    spec = load_text(CH17)
    assert spec.dims.as_dict() == {"B": 1, "T": 3, "C": 2, "H": 2, "F": 3, "V": 3, "T_max": 3, "d": 1}
    assert [s.name for s in spec.steps] == ["embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"]


def test_spec_is_frozen():
    spec = load_text(MIN)
    with pytest.raises(AttributeError):  # Spec is a NamedTuple (cheaper to create at every start than a dataclass)
        spec.dims = spec.dims  # type: ignore[misc]
    with pytest.raises(AttributeError):  # Dims is a NamedTuple (cheaper to import than a dataclass): frozen too
        spec.dims.C = 4  # type: ignore[misc]
