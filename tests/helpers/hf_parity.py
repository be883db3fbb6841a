"""Hugging Face parity, shared by the families' tests: a tiny random model saved, imported, traced and compared.

Hugging Face keeps the rotary angles and the softmax in float32 even in a float64 model; ``lift_float32``
replaces both by the same formulas in float64, so the comparison is float64 against float64 (1e-10).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run_app, run_cli

IDS = [5, 17, 42, 3, 29, 0, 11, 8]


def need_torch() -> tuple[Any, Any]:
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    return torch, transformers


def saved(torch: Any, model_class: Any, config: Any, folder: Path) -> Any:
    """A random model of ``config`` saved in float64 to ``folder`` and loaded back with eager attention."""
    torch.manual_seed(0)
    model = model_class(config).double().eval()
    with torch.no_grad():  # biases and norms away from their 0 / 1 start, so that a misplaced one shows
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    return model_class.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()


# a tiny LLaMA-like config: 2 layers of 4 heads (2 key/value heads) of width 12, F = 80, V = 64, weights drawn wide
TINY = {"vocab_size": 64, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 80, "max_position_embeddings": 32, "initializer_range": 0.2, "pad_token_id": 63, "bos_token_id": 1,
        "eos_token_id": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}


def tiny(tmp_path: Path, kind: str, config_class: str = "", **settings: Any) -> tuple[Any, Any, Path]:
    """transformers' ``<kind>ForCausalLM`` of TINY with ``settings`` (its config ``<kind>Config``, or ``config_class``),
    saved to tmp_path / its kind: (torch, the model, the folder)."""
    torch, transformers = need_torch()
    config = getattr(transformers, config_class or f"{kind}Config")(**(TINY | settings))
    folder = tmp_path / kind.lower()
    return torch, saved(torch, getattr(transformers, f"{kind}ForCausalLM"), config, folder), folder


def imported(tmp_path: Path, ckpt: Path, *args: str, name: str = "spec.yaml") -> Path:
    out = tmp_path / name
    r = run_app("import", str(ckpt), "-o", str(out), *args)
    assert r.returncode == 0, r.stderr
    return out


def traced(spec: Path) -> dict[str, np.ndarray]:
    r = run_cli("run", str(spec), "--json", "--all")
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}


def hf_forward(torch: Any, model: Any, layers: Any, ids: list[int]) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """HF's hidden states, each layer's own output (a hook) and the logits."""
    outputs: list[np.ndarray] = []
    hooks = [layer.register_forward_hook(lambda mod, args, out: outputs.append((out[0] if isinstance(out, tuple) else out).numpy()))
             for layer in layers]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    return [h.numpy() for h in out.hidden_states], outputs, out.logits.numpy()


def compare(st: dict[str, np.ndarray], hidden: list[np.ndarray], outputs: list[np.ndarray], logits: np.ndarray,
            entry: str = "embed") -> dict[str, float]:
    """Largest |tracer - HF| for the embedding (``entry``: the stage HF's first hidden state is, x where the embeddings are
    scaled), every layer's output, the final norm and the logits."""
    L = len(outputs)
    pairs = {entry: hidden[0], "final_norm": hidden[L], "logits": logits}
    for i in range(L):
        pairs[f"blocks.{i}.output"] = outputs[i]
    found = {}
    for name, want in pairs.items():
        assert st[name].shape == want.shape, (name, st[name].shape, want.shape)
        found[name] = float(np.max(np.abs(st[name] - want)))
    return found


def lift_float32(monkeypatch: Any, torch: Any, module: Any, prefix: str, rms: bool = False) -> None:
    """HF's float32 steps (the rotary angles, the softmax and, with ``rms``, its RMSNorm) as the same formulas in float64."""

    def rotary(self, x, position_ids):
        d = 2 * self.inv_freq.shape[0]
        theta = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        emb = torch.cat([position_ids[..., None].double() * inv_freq] * 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def eager(mod, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        groups = query.shape[1] // key.shape[1]  # grouped-query attention: each key/value head serves this many query heads
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
        w = torch.matmul(query, key.transpose(2, 3)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float64)
        return torch.matmul(w, value).transpose(1, 2).contiguous(), w

    def rms_norm(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(getattr(module, f"{prefix}RotaryEmbedding"), "forward", rotary)
    monkeypatch.setattr(module, "eager_attention_forward", eager)
    if rms:
        monkeypatch.setattr(getattr(module, f"{prefix}RMSNorm"), "forward", rms_norm)


def parity(tmp_path: Path, monkeypatch: Any, request: Any, model: Any, folder: Path, module: Any, prefix: str, family: str,
           ids: list[int] = IDS, tol: float = 1e-10, lift: Any = None, entry: str = "embed") -> Any:
    """A LLaMA-like model (``module``: its modeling file, ``prefix`` its classes') imported from ``folder`` with no flags and
    traced on ``ids``: every layer, the final norm and the logits within ``tol`` of its forward once its float32 rotary,
    RMSNorm and softmax are lifted to float64 (``lift(monkeypatch, torch, module)``: a family's own lifts in their place);
    the figure recorded for ``family``.  The imported spec, loaded."""
    import torch

    from tracer.spec import load_spec

    if lift is None:
        lift_float32(monkeypatch, torch, module, prefix, rms=True)
    else:
        lift(monkeypatch, torch, module)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))
    found = compare(traced(spec), *hf_forward(torch, model, model.model.layers, ids), entry=entry)
    assert max(found.values()) <= tol, found
    measured(request, family, found)
    return load_spec(str(spec))


def refused_with(folder: Path, changes: dict[str, Any], fragment: str) -> None:
    """``folder``'s config.json with ``changes`` made is refused by `tracer import` in one line naming ``fragment``."""
    from conftest import assert_refused

    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_app("import", str(folder)), "config.json: " + fragment)


PARITY = "parity"  # the user property a parity test records its figure under (tests/conftest.py prints them at the end)


def measured(request: Any, family: str, found: dict[str, float] | float) -> None:
    """Record the largest |tracer - Hugging Face| a parity test measured for ``family``: the run's summary lists the
    figures (CI's log holds them; docs/families.md quotes them)."""
    figure = max(found.values()) if isinstance(found, dict) else found
    request.node.user_properties.append((PARITY, [family, float(figure)]))


# -- a family's tiny model, its parity and its refusals, as the families' tests share them ---------------------------
TINY_FAMILY = {"vocab_size": 64, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 80,
        "max_position_embeddings": 32, "initializer_range": 0.2, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}


def tiny_family(tmp_path: Path, model_class: str, config_class: str, name: str, settings: dict[str, Any]) -> tuple[Any, Any, Path]:
    """(torch, the model, its folder): transformers' ``model_class`` of TINY_FAMILY's sizes with ``settings`` on top, saved in float64."""
    torch, transformers = need_torch()
    model = saved(torch, getattr(transformers, model_class), getattr(transformers, config_class)(**(TINY_FAMILY | settings)), tmp_path / name)
    return torch, model, tmp_path / name


def family_parity(tmp_path: Path, request: Any, family: str, torch: Any, model: Any, folder: Path, first: str = "embed") -> tuple[Path, dict[str, float]]:
    """``folder`` imported with no flag but the tokens, traced, and compared with ``model``'s forward at every layer (its float32
    internals lifted by the caller): asserted within 1e-10, the figure recorded; the spec's path and the differences."""
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    found = compare(traced(spec), *hf_forward(torch, model, model.model.layers, IDS), entry=first)
    assert max(found.values()) <= 1e-10, found
    measured(request, family, found)
    return spec, found


def with_config(folder: Path, changes: dict[str, Any]) -> Path:
    """``folder``'s config.json with ``changes`` written over it."""
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def lift_rms_norm(monkeypatch: Any, torch: Any, norm_class: Any) -> None:
    """An RMSNorm that computes in float32 even in a float64 model (Granite's, OLMo 2's): the same formula in float64."""
    def forward(self: Any, x: Any) -> Any:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(norm_class, "forward", forward)
