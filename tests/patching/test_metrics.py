"""tracer patch --metric logit | logit-diff | prob | logprob, and --normalise: each cell against the full run of that cell
(--set), its metric computed here from the run's logits with numpy; tokens as ids, vocab words and tokenizer text."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import EXAMPLES, assert_refused, run_app

import tracer

CLEAN = str(EXAMPLES / "interventions" / "clean.yaml")
CORRUPT = str(EXAMPLES / "interventions" / "corrupt.yaml")


def metric_of(logits: np.ndarray, kind: str, a: int, b: int) -> float:
    """The metric at the last position of sample 0, from the logits [B,T,V], by a log-sum-exp of its own."""
    row = logits[0, -1].astype(np.float64)
    if kind == "logit":
        return float(row[a])
    if kind == "logit-diff":
        return float(row[a] - row[b])
    lse = np.log(np.sum(np.exp(row - row.max()))) + row.max()
    return float(row[a] - lse) if kind == "logprob" else float(np.exp(row[a] - lse))


def full_runs(tmp_path, name: str) -> list[np.ndarray]:
    """The full corrupt run with stage ``name`` at each position t set from the clean run: its logits, t by t."""
    clean, corrupt = tracer.trace(CLEAN), tracer.trace(CORRUPT)
    out = []
    for t in range(5):
        value = corrupt[name].copy()
        value[:, t] = clean[name][:, t]
        np.savez(tmp_path / "cell.npz", v=value)
        out.append(tracer.trace(CORRUPT, set=f"{name}={tmp_path}/cell.npz:v")["logits"])
    return out


@pytest.mark.parametrize("kind", ["logit", "logit-diff", "prob", "logprob"])
def test_each_metric_is_the_full_runs_metric_and_normalised_is_its_share(tmp_path, kind):
    against = "mat" if kind == "logit-diff" else None
    g = tracer.patch(CLEAN, CORRUPT, stage="blocks.0.output", token="cat", against=against, metric=kind)
    n = tracer.patch(CLEAN, CORRUPT, stage="blocks.0.output", token="cat", against=against, metric=kind, normalise=True)
    vocab = tracer.trace(CLEAN).spec.vocab
    a, b = vocab.index("cat"), vocab.index("mat")
    m_clean, m_corrupt = (metric_of(tracer.trace(s)["logits"], kind, a, b) for s in (CLEAN, CORRUPT))
    assert abs(g.logit_clean - m_clean) <= 1e-12 and abs(g.logit_corrupt - m_corrupt) <= 1e-12
    for t, logits in enumerate(full_runs(tmp_path, "blocks.0.output")):
        m = metric_of(logits, kind, a, b)
        assert abs(g.logits[0, t] - m) <= 1e-12, (t, g.logits[0, t], m)
        assert abs(g.delta[0, t] - (m - m_corrupt)) <= 1e-12
        assert abs(n.delta[0, t] - (m - m_corrupt) / (m_clean - m_corrupt)) <= 1e-12
    assert n.delta[0, 0] == 0.0  # position 0 reads the same token in both runs: nothing moves, 0 is the corrupt run
    last = tracer.patch(CLEAN, CORRUPT, stage="blocks.1.output", token="cat", against=against, metric=kind, normalise=True)
    assert abs(last.delta[0, 4] - 1.0) <= 1e-12  # the last layer at the last position is the clean run: 1


def test_the_metric_in_the_title_json_and_csv():
    args = ("patch", CLEAN, CORRUPT, "--stage", "blocks.*.output", "--metric", "logit-diff", "--token", "cat", "--against", "5")
    r = run_app(*args)
    assert r.returncode == 0, r.stderr
    assert "activation patching: logit('cat') - logit('mat') at b=0, t=4, patched run minus corrupt run" in r.stdout
    g = tracer.patch(CLEAN, CORRUPT, token="cat", against=5, metric="logit-diff")
    doc = json.loads(run_app(*args, "--json").stdout)
    assert doc["metric"] == {"kind": "logit-diff", "normalise": False, "tokens": [g.token], "against": [5], "label": "logit('cat') - logit('mat')"}
    assert doc["value"] == {"clean": g.logit_clean, "corrupt": g.logit_corrupt} and "logit" not in doc
    assert [c["delta"] for c in doc["cells"]] == [float(x) for x in g.delta.ravel()]
    rows = list(csv.reader(io.StringIO(run_app(*args, "--format", "csv").stdout)))
    assert rows[0] == ["stage", "t", "token", "logit-diff", "delta"] and float(rows[1][3]) == g.logits[0, 0]
    r = run_app("patch", CLEAN, CORRUPT, "--metric", "prob", "--token", "cat", "--normalise")
    assert "activation patching: p('cat') at b=0, t=4, (patched - corrupt) / (clean - corrupt): 0 is the corrupt run, 1 the clean one" in r.stdout


def test_metric_mistakes_are_refused():
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--metric", "kl"), "--metric kl: expected one of logit, logit-diff, prob, logprob")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--metric", "logit-diff", "--token", "cat"), "--metric logit-diff: give --against")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--against", "mat"), "--against is for --metric logit-diff")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--metric", "logit-diff", "--token", "cat", "--against", "dog"), "--against 'dog'")
    assert_refused(run_app("patch", CLEAN, CLEAN, "--normalise"), "--normalise: the clean and the corrupt run give", "in sample 0")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--token", "cat", "--token", "mat"), "--token: give one token for every sample or one a sample (1)")


def test_tokens_as_text_in_the_checkpoints_tokenizer(tmp_path):
    pytest.importorskip("tokenizers", reason="text in needs the tokenizers package")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_text", EXAMPLES / "text" / "make_tiny.py")
    assert spec is not None and spec.loader is not None
    make_tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_tiny)
    make_tiny.make(str(tmp_path / "tiny"))
    for name, text in (("clean", "The capital of France is"), ("corrupt", "The capital of Germany is")):
        r = run_app("import", str(tmp_path / "tiny"), "--text", text, "-o", str(tmp_path / f"{name}.yaml"))
        assert r.returncode == 0, r.stderr
    clean, corrupt = str(tmp_path / "clean.yaml"), str(tmp_path / "corrupt.yaml")
    g = tracer.patch(clean, corrupt, token=" Paris", against=" Berlin", metric="logit-diff")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tmp_path / "tiny" / "tokenizer.json"))
    paris, berlin = tok.token_to_id("ĠParis"), tok.token_to_id("ĠBerlin")
    assert g.metric.tokens == (paris,) and g.metric.against == (berlin,)
    logits = tracer.trace(clean)["logits"]
    assert abs(g.logit_clean - (logits[0, -1, paris] - logits[0, -1, berlin])) <= 1e-12
    assert g.words[4].startswith("t=4 (") and "Germany" in g.words[4]
