"""An embedding read from a file is read only in the rows the input's tokens use: tracer diff compares what the spec
means, those rows on both sides, never a half-read table against a whole one (a course whose solution reads every
weight from files grades an exact copy 10/10)."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import numpy as np
from conftest import compared, run_app

BLOCK = """dims: {B: 1, T: 3, C: 2, H: 2, F: 3}
block: {norm_order: pre, mask: causal, eps: 1e-5, final_norm: false}
input: {tokens: [0, 1, 2]}
weights:
  embedding: EMBEDDING
  position: {file: w.npz, key: P}
  attn: {w_q: {file: w.npz, key: Wq}, w_k: {file: w.npz, key: Wk}, w_v: {file: w.npz, key: Wv}, w_o: {file: w.npz, key: Wo}}
  ffn: {w1: {file: w.npz, key: W1}, b1: zeros, w2: {file: w.npz, key: W2}, b2: zeros}
  norm1: {gamma: ones, beta: zeros}
  norm2: {gamma: ones, beta: zeros}
"""
E = [[1, 0], [0, 1], [1, 1], [2, 3], [4, 5]]  # five rows; the tokens read rows 0, 1 and 2


def _course(tmp_path: Path) -> tuple[Path, Path, Path]:
    solution = tmp_path / "solution"
    solution.mkdir()
    np.savez(solution / "w.npz", E=np.array(E, float), P=np.array([[0, 0], [0, 1], [1, 0]], float), Wq=np.eye(2), Wk=np.eye(2),
             Wv=np.eye(2), Wo=np.array([[1.0, 1], [1, -1]]), W1=np.array([[1.0, -1, 0], [0, 1, 1]]), W2=np.array([[1.0, 0], [0, 1], [1, -1]]))
    (solution / "prenorm.yaml").write_text("name: solution\n" + BLOCK.replace("EMBEDDING", "{file: w.npz, key: E}"), encoding="utf-8")
    refs = tmp_path / "reference"
    refs.mkdir()
    saved = run_app("run", str(solution / "prenorm.yaml"), "--json", "--with-weights")
    assert saved.returncode == 0, saved.stderr
    (refs / "prenorm.json").write_text(saved.stdout, encoding="utf-8")
    return solution, refs, solution / "prenorm.yaml"


def test_the_same_table_inline_and_from_a_file_is_the_same_block(tmp_path: Path):
    solution, _, spec = _course(tmp_path)
    inline = solution / "inline.yaml"
    inline.write_text("name: solution\n" + BLOCK.replace("EMBEDDING", str(E)), encoding="utf-8")
    r = compared(str(spec), str(inline))
    assert r.same and r.exit_code == 0, r.summary()
    assert any("weights.embedding compared on the 3 rows the run reads (0, 1, 2): A reads only those rows of its file" in n for n in r.notes)


def test_a_reference_saved_from_the_spec_is_the_spec(tmp_path: Path):
    _, refs, spec = _course(tmp_path)
    r = compared(str(refs / "prenorm.json"), str(spec))
    assert r.same and not r.weights_differ, r.summary()


def test_a_row_the_run_reads_that_differs_still_differs(tmp_path: Path):
    solution, refs, spec = _course(tmp_path)
    other = solution / "other.yaml"
    other.write_text("name: solution\n" + BLOCK.replace("EMBEDDING", str([[1, 0], [0, 1], [1, 2], [2, 3], [4, 5]])), encoding="utf-8")
    r = compared(str(refs / "prenorm.json"), str(other))
    assert [w.name for w in r.weights_differ] == ["embedding"] and r.weights_differ[0].where == (2, 1)


def test_an_exact_copy_of_a_solution_that_reads_its_weights_from_files_is_graded_10(tmp_path: Path):
    solution, refs, _ = _course(tmp_path)
    students = tmp_path / "students"
    shutil.copytree(solution, students / "alice")
    (students / "bob").mkdir()
    shutil.copy(solution / "w.npz", students / "bob" / "w.npz")
    (students / "bob" / "prenorm.yaml").write_text("name: bob\n" + BLOCK.replace("EMBEDDING", str(E)), encoding="utf-8")
    r = run_app("grade", str(students), str(refs), "--csv", "-")
    assert r.returncode == 0, r.stderr
    every = list(csv.reader(io.StringIO(r.stdout)))[1:]
    rows = {row[0]: row for row in every if row[4] != "not graded"}
    data = {row[7]: row[6] for row in every if row[4] == "not graded"}
    assert data == {"alice/w.npz": "a file alice/prenorm.yaml reads, not a hand-in", "bob/w.npz": "a file bob/prenorm.yaml reads, not a hand-in"}
    assert rows["alice"][2:5] == ["10", "10", "same"], rows["alice"]
    assert rows["bob"][2:5] == ["10", "10", "same"], rows["bob"]
