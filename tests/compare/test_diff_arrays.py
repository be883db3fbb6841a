"""tracer diff SPEC ACTIVATIONS: another program's arrays against tracer's trace, stage by stage, with hints."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from conftest import PRE, assert_refused, compared, run_app
from helpers import oracle

from tracer import i18n

MAIN = ("x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output")


def save(tmp_path, arrays, name="mine.npz"):
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


def main_stages(bugs=()):
    return {k: v for k, v in oracle.chapter_block(bugs).items() if k in MAIN}


# -- the typical bugs: the first diverging stage alone points at the bug ------------------------

EXPECTED = {  # bug -> (first diverging stage with the main stages recorded, the diagnosis, with the internals too)
    "ddof": ("norm1", "ddof", "norm1"),
    "ln_axis": ("norm1", "ln_over_t", "norm1"),
    "no_residual": ("residual1", "no_residual", "residual1"),
    "softmax_queries": ("attention", "softmax_queries", "attn.weights"),
    "mask_after": ("attention", "mask_after", "attn.weights"),
    "no_w_o": ("attention", "no_w_o", "attention"),
}


@pytest.mark.parametrize("bug", oracle.STUDENT_BUGS)
def test_each_typical_bug_is_found_at_its_stage_with_its_hint(tmp_path, bug):
    stage, diagnosis, _ = EXPECTED[bug]
    r = compared(PRE, save(tmp_path, main_stages([bug])))
    assert r.exit_code == 1
    assert r.first_diverging is not None and r.first_diverging.name == stage
    assert r.hint is not None and r.hint.stage == stage and r.hint.bug == diagnosis
    before = list(MAIN[: MAIN.index(stage)])
    assert r.hint.prev == before[-1]  # "norm1 differs but x agrees"
    assert all(row.status == "equal" for row in r.stages if row.name in before)


@pytest.mark.parametrize("bug", oracle.STUDENT_BUGS)
def test_recording_the_internals_narrows_it_down(tmp_path, bug):
    _, _, stage = EXPECTED[bug]
    r = compared(PRE, save(tmp_path, oracle.chapter_block([bug])))
    assert r.first_diverging is not None and r.first_diverging.name == stage
    assert r.hint is not None and r.hint.stage == stage


def test_the_hint_is_printed_in_both_languages(tmp_path):
    path = save(tmp_path, main_stages(["ddof"]))
    r = run_app("diff", PRE, path)
    assert r.returncode == 1, r.stderr
    assert "first diverging stage: norm1 (differs, largest |A - B| = " in r.stdout
    # the diagnosis alone: the LayerNorm checklist (C-1, ε, the axis) is for when no known mistake matches
    assert "hint: norm1 differs but x agrees. Your norm1 equals LayerNorm with the variance divided by C-1 (ddof=1): divide by C" in r.stdout
    assert "look at LayerNorm" not in r.stdout
    zh = run_app("diff", PRE, path, "--lang", "zh")
    assert zh.returncode == 1
    assert "提示：norm1 不同，但 x 一致。" in zh.stdout and "ddof=1" in zh.stdout and "应除以 C" in zh.stdout


def test_hint_without_a_diagnosis_still_names_the_usual_mistakes(tmp_path):
    arrays = main_stages()
    arrays["norm2"] = arrays["norm2"] * 1.5  # no typical bug: the advice alone
    r = compared(PRE, save(tmp_path, arrays))
    assert r.hint is not None and r.hint.diagnosis is None
    assert r.hint.english() == ("norm2 differs but residual1 agrees: no known mistake matches; look at LayerNorm "
                                "(divide by C, not C-1; ε inside the square root; "
                                "mean and variance over the C coordinates of each position, not over T or B)")


def test_where_and_both_values_are_named(tmp_path):
    arrays = main_stages()
    arrays["ffn"] = arrays["ffn"].copy()
    arrays["ffn"][2, 1] += 0.5
    r = compared(PRE, save(tmp_path, arrays))
    first = r.first_diverging
    assert first is not None and first.name == "ffn" and first.where == (0, 2, 1)
    assert first.where_label() == "b=0, t=2, c=1" and first.max_abs_diff == pytest.approx(0.5)
    assert "at b=0, t=2, c=1: A " in r.summary()
    assert r.summary().count("output") == 0  # output differs too, but ffn is the first


# -- the correct block, the file kinds, names and shapes ---------------------------------------

def test_a_correct_block_diffs_with_exit_0_and_says_what_was_not_recorded(tmp_path):
    r = run_app("diff", PRE, save(tmp_path, main_stages()))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "same: all 8 recorded stages agree" in r.stdout and "2 stages not recorded" in r.stdout
    assert "without the batch axis: read with B = 1" in r.stdout  # the student's arrays are [T,C]


def test_json_object_of_nested_lists(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({k: v.tolist() for k, v in main_stages(["no_w_o"]).items()}), encoding="utf-8")
    r = run_app("diff", PRE, str(path), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["first_diverging"] == "attention" and "W_O" in doc["hint"]
    assert doc["arrays"]["matched"] == list(MAIN) and doc["arrays"]["without_batch_axis"] == list(MAIN)


def test_tracers_own_save_archive_on_either_side(tmp_path):
    archive = tmp_path / "saved.npz"
    assert run_app("run", PRE, "--save", str(archive)).returncode == 0
    assert run_app("diff", PRE, str(archive)).returncode == 0
    assert run_app("diff", str(archive), PRE).returncode == 0
    mine = save(tmp_path, main_stages(["ddof"]))
    r = run_app("diff", str(archive), mine)  # two files of arrays: axis letters from the stage catalogue
    assert r.returncode == 1 and "first diverging stage: norm1" in r.stdout


def test_map_options_and_map_file(tmp_path):
    arrays = main_stages()
    arrays["ln_1"] = arrays.pop("norm1")
    arrays["mystery"] = np.zeros(4)
    path = save(tmp_path, arrays)
    r = compared(PRE, path)
    assert r.exit_code == 0 and "norm1" in r.arrays.not_recorded
    assert any("match no stage of A: ln_1, mystery" in n for n in r.notes)  # listed, never silently ignored
    r = compared(PRE, path, names=["ln_1=norm1"])
    assert r.arrays.renamed == {"norm1": "ln_1"} and r.arrays.unmatched == ["mystery"]
    names = tmp_path / "names.yaml"
    names.write_text("ln_1: norm1\n", encoding="utf-8")
    assert run_app("diff", PRE, path, "--map", str(names)).returncode == 0


@pytest.mark.parametrize("option, fragments", [
    ("ln_1", ["--map ln_1", "expected THEIRS=OURS"]),
    ("nope=norm1", ["--map nope=norm1", "has no array 'nope'"]),
    ("ln_1=nrom1", ["--map ln_1=nrom1", "has no stage 'nrom1'", "did you mean 'norm1'"]),
    ("=norm1", ["expected THEIRS=OURS"]),
])
def test_bad_map_is_exit_2(tmp_path, option, fragments):
    arrays = main_stages()
    arrays["ln_1"] = arrays.pop("norm1")
    assert_refused(run_app("diff", PRE, save(tmp_path, arrays), "--map", option), *fragments)


def test_two_arrays_mapped_to_one_stage_is_exit_2(tmp_path):
    path = save(tmp_path, {"a": np.zeros((3, 2)), "b": np.zeros((3, 2))})
    assert_refused(run_app("diff", PRE, path, "--map", "a=norm1", "--map", "b=norm1"), "both mapped to the stage 'norm1'")


def test_other_shapes_are_a_difference_with_axis_letters_not_a_crash(tmp_path):
    arrays = main_stages()
    arrays["norm1"] = arrays["norm1"].T  # [C,T]
    r = run_app("diff", PRE, save(tmp_path, arrays))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "first diverging stage: norm1 (shapes differ" in r.stdout
    assert "[C,T] = [2,3]" in r.stdout and "[B,T,C] = [1,3,2]" in r.stdout
    assert "expected [1, 3, 2], or [3, 2] without the batch axis" in r.stdout


def test_no_array_matching_anything_is_trouble(tmp_path):
    assert_refused(run_app("diff", PRE, save(tmp_path, {"foo": np.zeros(2)})), "no array matches a stage of A", "foo", "--map")


def npy_bytes(a):
    buffer = io.BytesIO()
    np.save(buffer, a)
    return buffer.getvalue()


@pytest.mark.parametrize("make, fragment", [
    (lambda p: p.write_bytes(b"not a zip at all"), "is not an .npz archive"),
    (lambda p: p.write_bytes(b""), "is not an .npz archive"),
    (lambda p: p.write_bytes(npy_bytes(np.zeros(3))), "holds one bare array (.npy)"),
    (lambda p: p.write_bytes(b"PK\x03\x04garbage"), "not a readable .npz archive"),
    (lambda p: np.savez(p, norm1=np.array([{"a": 1}], dtype=object)), "holds Python objects"),
    (lambda p: np.savez(p, norm1=np.array(["a", "b"])), "expected numbers"),
    (lambda p: np.savez(p), "holds no arrays"),
])
def test_bad_npz_is_exit_2_one_line(tmp_path, make, fragment):
    path = tmp_path / "mine.npz"
    make(path)
    assert_refused(run_app("diff", PRE, str(path)), str(path), fragment)


@pytest.mark.parametrize("dtype", [">f8", "<f4", "<f2", ">i4", "<u2", "|u1"])
def test_arrays_of_any_byte_order_and_numeric_type_are_read(tmp_path, dtype):
    """An .npz of another program's arrays is read by tracer's own bounded reader: big-endian and unsigned arrays too,
    and in Fortran order, each as the numbers it holds."""
    stages = main_stages()
    kind = np.dtype(dtype).kind
    arrays = {k: np.asfortranarray((np.round(v * 4) if kind in "iu" else v).astype(dtype)) for k, v in stages.items()}
    if kind == "u":
        arrays = {k: np.abs(v) for k, v in arrays.items()}
    path = save(tmp_path, arrays)
    from tracer.compare.arrays import read_npz

    got = read_npz(path)
    assert set(got) == set(arrays)
    for k, a in arrays.items():
        assert got[k].dtype == np.float64 and np.array_equal(got[k], a.astype(np.float64)), k


def test_pickles_are_never_loaded(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    path = tmp_path / "evil.npz"
    np.savez(path, norm1=np.array([Evil()], dtype=object))  # the archive holds a pickle that would write the marker
    with np.load(path, allow_pickle=True) as z:  # the test can fail: loading it with pickles allowed runs the code
        z["norm1"]
    assert marker.exists()
    marker.unlink()
    assert_refused(run_app("diff", PRE, str(path)), "holds Python objects")
    assert not marker.exists()


def test_a_json_file_of_arrays_with_a_bad_value_is_exit_2(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text('{"norm1": [[1, 2], [3, "x"]]}', encoding="utf-8")
    assert_refused(run_app("diff", PRE, str(path)), "norm1[1, 1]", "expected a number")


def test_tolerance_options_apply(tmp_path):
    arrays = main_stages()
    arrays["output"] = arrays["output"] + 1e-6
    path = save(tmp_path, arrays)
    assert run_app("diff", PRE, path).returncode == 1
    assert run_app("diff", PRE, path, "--atol", "1e-5").returncode == 0


def test_markdown_and_zh_table(tmp_path):
    path = save(tmp_path, main_stages(["no_residual"]))
    md = run_app("diff", PRE, path, "--format", "markdown")
    assert md.returncode == 1 and "hint: residual1 differs but attention agrees" in md.stdout
    with i18n.using("zh"):
        assert "未记录" in i18n.tr("not recorded")



def test_the_whole_report_in_zh(tmp_path):
    arrays = main_stages(["no_w_o"])
    arrays["mystery"] = np.zeros(2)
    zh = run_app("diff", PRE, save(tmp_path, arrays), "--lang", "zh")
    assert zh.returncode == 1
    for chinese in ("数组，9 个", "与 A", "没有批次轴：按 B = 1 读取", "对不上的数组：mystery", "未记录", "第一个出现分歧的阶段：attention",
                    "8 个已记录的阶段中有", "2 个阶段未记录", "提示：attention 不同，但 norm1 一致", "乘 W_O 之前的各头结果"):
        assert chinese in zh.stdout, chinese


def test_arrays_on_side_a(tmp_path):
    r = compared(save(tmp_path, main_stages(["ddof"])), PRE)
    assert r.exit_code == 1 and r.arrays is not None and r.arrays.label == "A"
    assert r.first_diverging is not None and r.first_diverging.name == "norm1"
    assert r.hint is not None and r.hint.bug == "ddof"
