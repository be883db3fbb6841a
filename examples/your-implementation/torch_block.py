"""The chapter's Pre-Norm block as PyTorch modules, recorded with forward hooks (needs torch: the optional extra).

    python examples/your-implementation/torch_block.py torch.npz
    tracer diff specs/ch17-prenorm.yaml torch.npz       # exit 0

Each stage is a module (the residual adds are nn.Identity hook points, as TransformerLens does), and
one forward hook per module hands its output to tracer.recorder under tracer's stage name.  The
model runs in float64: in float32 the stages agree only to about 1e-7 (give --atol 1e-6 then).
"""

from __future__ import annotations

import sys

import torch
from torch import nn

import tracer

T, C, H, F = 3, 2, 2, 3


class PreNormBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(C, eps=1e-5)
        self.attention = nn.MultiheadAttention(C, H, bias=False, batch_first=True)
        self.residual1 = nn.Identity()  # a hook point: x + u
        self.norm2 = nn.LayerNorm(C, eps=1e-5)
        self.w1 = nn.Linear(C, F)
        self.hidden = nn.ReLU()
        self.ffn = nn.Linear(F, C)
        self.output = nn.Identity()  # a hook point: r + ffn

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B,T,C] -> [B,T,C]
        causal = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), diagonal=1)  # True: may not look
        n1 = self.norm1(x)
        u, _ = self.attention(n1, n1, n1, attn_mask=causal, need_weights=False)
        r = self.residual1(x + u)
        f = self.ffn(self.hidden(self.w1(self.norm2(r))))
        return self.output(r + f)


def chapter_weights(model: PreNormBlock) -> None:
    """specs/ch17-prenorm.yaml's weights; torch's Linear stores W transposed ([out, in])."""
    with torch.no_grad():
        model.attention.in_proj_weight.copy_(torch.cat([torch.eye(C)] * 3))  # W_Q, W_K, W_V = identity
        model.attention.out_proj.weight.copy_(torch.tensor([[1.0, 1.0], [1.0, -1.0]]).T)
        model.w1.weight.copy_(torch.tensor([[1.0, -1.0, 0.0], [0.0, 1.0, 1.0]]).T)
        model.w1.bias.zero_()
        model.ffn.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]).T)
        model.ffn.bias.zero_()


def main(path: str) -> None:
    model = PreNormBlock().double()
    chapter_weights(model)
    E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    P = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    x = (E[[0, 1, 2]] + P[:T]).unsqueeze(0)  # [B,T,C] = [1,3,2]
    with tracer.recorder(path) as rec:

        def hook(name: str):  # a forward hook that returns None leaves the module's output as it is
            def record(module: nn.Module, args: tuple, out: torch.Tensor | tuple) -> None:
                rec(name, out[0] if isinstance(out, tuple) else out)  # MultiheadAttention returns (output, weights)
            return record

        rec("x", x)
        for name in ("norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"):
            getattr(model, name).register_forward_hook(hook(name))
        with torch.no_grad():
            model(x)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch-block.npz")
