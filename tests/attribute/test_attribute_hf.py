"""tracer attribute on a tiny random GPT-2 built with transformers' own classes (float64, save_pretrained, tracer import):
every part against the same split made from Hugging Face's own tensors (hooks on c_proj's input, each MLP's output and
ln_f's input), and the parts' sum against HF's logit, to 1e-10."""

from __future__ import annotations

import numpy as np
from helpers.hf_parity import IDS, imported, need_torch, saved

import tracer

TOL = 1e-10


def test_gpt2_parts_are_hugging_faces_split_and_sum_to_its_logit(tmp_path):
    torch, transformers = need_torch()
    L, C, H = 2, 32, 4
    d = C // H
    cfg = transformers.GPT2Config(n_layer=L, n_embd=C, n_head=H, vocab_size=48, n_positions=16, attn_implementation="eager")
    model = saved(torch, transformers.GPT2LMHeadModel, cfg, tmp_path / "gpt2")
    spec = imported(tmp_path, tmp_path / "gpt2", "--tokens", ",".join(map(str, IDS)))
    seen: dict[str, np.ndarray] = {}
    hooks = []
    for i, block in enumerate(model.transformer.h):
        hooks.append(block.attn.c_proj.register_forward_pre_hook(lambda m, args, i=i: seen.__setitem__(f"mix{i}", args[0][0].numpy().copy())))
        hooks.append(block.mlp.register_forward_hook(lambda m, args, out, i=i: seen.__setitem__(f"mlp{i}", out[0].numpy().copy())))
    hooks.append(model.transformer.ln_f.register_forward_pre_hook(lambda m, args: seen.__setitem__("resid", args[0][0].numpy().copy())))
    try:
        with torch.no_grad():
            logits = model(torch.tensor([IDS])).logits[0].numpy()
    finally:
        for h in hooks:
            h.remove()
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    for pos, tok, other in ((len(IDS) - 1, 7, None), (3, 30, 2)):
        u = sd["transformer.wte.weight"][tok] - (sd["transformer.wte.weight"][other] if other is not None else 0.0)
        r = seen["resid"][pos]
        sigma = np.sqrt(np.var(r) + cfg.layer_norm_epsilon)
        gamma, beta = sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]

        def through(c, u=u, sigma=sigma, gamma=gamma):
            return float(((c - c.mean()) * gamma / sigma) @ u)

        want = {"embed": through(sd["transformer.wte.weight"][IDS[pos]]), "position": through(sd["transformer.wpe.weight"][pos]),
                "final_norm.beta": float(beta @ u)}
        for i in range(L):
            w = sd[f"transformer.h.{i}.attn.c_proj.weight"]  # Conv1D: [in, out]
            for h in range(H):
                want[f"blocks.{i}.attn.head.{h}"] = through(seen[f"mix{i}"][pos, h * d:(h + 1) * d] @ w[h * d:(h + 1) * d])
            want[f"blocks.{i}.attn.bias"] = through(sd[f"transformer.h.{i}.attn.c_proj.bias"])
            want[f"blocks.{i}.ffn"] = through(seen[f"mlp{i}"][pos])
        a = tracer.attribution(spec, token=tok, against=other, position=pos)
        got = {p.name: p.value for p in a.parts}
        assert set(got) == set(want)
        worst = max(abs(got[k] - want[k]) for k in want)
        assert worst <= TOL, worst
        hf = float(logits[pos, tok] - (logits[pos, other] if other is not None else 0.0))
        assert abs(a.total - hf) <= TOL, a.total - hf
        assert abs(a.logit - hf) <= TOL
