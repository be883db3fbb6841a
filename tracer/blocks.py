"""A block is a short list of named steps, written out like the book's small_block.

Pre-norm and post-norm are two lists, not branches inside one function.  Each
step names the stage it records, the op that computes it, the stages it reads
and the weight group it uses.  Nothing here imports NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    name: str  # the stage this step records
    op: str  # an op of executor.OPS
    inputs: tuple[str, ...]  # stage names read
    weights: str | None = None  # weight group: norm1, attn, ffn, ...
    meaning: str = ""  # what the stage is, as Table 17.1 words it

    def formula(self) -> str:
        args = ", ".join(self.inputs)
        return f"{self.name} = {self.op}({args}{'; ' + self.weights if self.weights else ''})"


# Example 17.2 / section 17.5: N1 = LN1(X), U = MHA(N1), R = X + U, N2 = LN2(R), Y = R + FFN(N2)
PRE_NORM: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", "first normalisation, N_1 = LN_1(X)"),
    Step("attention", "mha", ("norm1",), "attn", "attention output, U = MHA(N_1)"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add, R = X + U"),
    Step("norm2", "layer_norm", ("residual1",), "norm2", "second normalisation, N_2 = LN_2(R)"),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", "FFN after ReLU, ReLU(N_2 W_1 + b_1)"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output, hidden W_2 + b_2"),
    Step("output", "add", ("residual1", "ffn"), None, "block output, Y = R + FFN(N_2)"),
)

# Section 17.6: R_post = LN1(X + MHA(X)), Y_post = LN2(R_post + FFN(R_post))
POST_NORM: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", "attention output, U = MHA(X)"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add, X + U"),
    Step("norm1", "layer_norm", ("residual1",), "norm1", "first normalisation, R_post = LN_1(X + U)"),
    Step("hidden", "ffn_hidden", ("norm1",), "ffn", "FFN after ReLU, ReLU(R_post W_1 + b_1)"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output, hidden W_2 + b_2"),
    Step("residual2", "add", ("norm1", "ffn"), None, "second residual add, R_post + FFN(R_post)"),
    Step("norm2", "layer_norm", ("residual2",), "norm2", "second normalisation, LN_2(R_post + FFN)"),
    Step("output", "identity", ("norm2",), None, "block output, Y_post"),
)

FINAL_NORM = Step("final_norm", "layer_norm", ("output",), "final_norm", "final normalisation after the block (Mini GPT)")

PRESETS: dict[str, tuple[Step, ...]] = {"pre": PRE_NORM, "post": POST_NORM}


def block_steps(norm_order: str, final_norm: bool) -> tuple[Step, ...]:
    steps = PRESETS[norm_order]
    return steps + (FINAL_NORM,) if final_norm else steps


# Stages recorded before the block and inside attention (their meaning and axes).
ENTRY_STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "embed": ("token embeddings, rows of E", ("B", "T", "C")),
    "input": ("input matrix given in the spec", ("B", "T", "C")),
    "position": ("position vectors, rows of P", ("T", "C")),
    "x": ("token + position, X", ("B", "T", "C")),
}

ATTN_STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "attn.q": ("queries, split into heads", ("B", "H", "T", "d")),
    "attn.k": ("keys, split into heads", ("B", "H", "T", "d")),
    "attn.v": ("values, split into heads", ("B", "H", "T", "d")),
    "attn.scores": ("scores QK^T / sqrt(d), before the mask", ("B", "H", "T", "T")),
    "attn.weights": ("attention weights, softmax over keys after the mask", ("B", "H", "T", "T")),
    "attn.heads": ("heads mixed and concatenated, before W_O", ("B", "T", "C")),
}

OP_AXES: dict[str, tuple[str, ...]] = {
    "layer_norm": ("B", "T", "C"),
    "mha": ("B", "T", "C"),
    "add": ("B", "T", "C"),
    "identity": ("B", "T", "C"),
    "ffn_hidden": ("B", "T", "F"),
    "ffn_out": ("B", "T", "C"),
}
