"""Commented specs to start from (``tracer new --preset NAME``).  Plain text, no NumPy.

Every preset validates and runs as printed (tests/spec/test_presets.py runs each one).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    text: str


# Example 17.2's weights (sections 17.1, 16.3, 17.4), shared by the chapter presets.
CHAPTER_WEIGHTS = """\
weights:
  embedding: [[1, 0], [0, 1], [1, 1]]     # E [V,C]: one row per token id
  position: [[0, 0], [0, 1], [1, 0]]      # P [T_max,C]: X = E[tokens] + P, section 17.1
  attn:                                   # Example 16.3: two one-coordinate causal heads
    w_q: identity                         # [C,C]; head h reads columns h*d .. (h+1)*d - 1
    w_k: identity                         # identity | zeros | ones | random | a nested list
    w_v: identity
    w_o: [[1, 1], [1, -1]]                # mixes the concatenated heads back to width C
  ffn:                                    # section 17.4: 2 -> 3 -> 2
    w1: [[1, -1, 0], [0, 1, 1]]           # [C,F]
    b1: zeros                             # [F]
    w2: [[1, 0], [0, 1], [1, -1]]         # [F,C]
    b2: zeros                             # [C]
  norm1: {gamma: ones, beta: zeros}       # [C] each; beta: [0] would be a broadcast violation
  norm2: {gamma: ones, beta: zeros}
"""

CH17 = f"""\
# The block of Chapter 17 (Example 17.2): one pre-norm layer with the book's own weights.
#   tracer run FILE              Table 17.1; the first output row is Y_1 = [1.999980, 2.999940]
#   tracer run FILE --all        also the attention internals (attn.q, attn.scores, attn.weights, ...)
#   tracer run FILE --steps      the step list this block runs, with every stage's shape
#   tracer stages                what every stage name means
# Change one thing and run again to see what moves:
#   block.norm_order: post       the original Transformer's order (section 17.6)
#   block.eps: 1e-3              another epsilon (exercise 6)
#   block.mask: none             every position reads every key
name: "Example 17.2, pre-norm"
dims: {{B: 1, T: 3, C: 2, H: 2, F: 3}}   # samples, positions, width, heads (d = C / H = 1), FFN width
block:
  norm_order: pre        # pre: N1 = LN1(X), U = MHA(N1), R = X + U, N2 = LN2(R), Y = R + FFN(N2)
  mask: causal           # causal | none | a [T,T] matrix of 0 and 1 (1: the query may read that key)
  eps: 1e-5              # LayerNorm epsilon
  final_norm: false      # true: one more LayerNorm after the block (the book's Mini GPT)
input:
  tokens: [0, 1, 2]      # ids into weights.embedding; or x: [[...], ...] to give X itself
{CHAPTER_WEIGHTS}"""

CUSTOM = f"""\
# The chapter's block written out as its own step list, the way the book writes small_block.
# Each step records one stage: {{name, op, in, weights}} (and axis, meaning where it matters).
#   tracer run FILE --steps      the steps with every stage's shape
# Ops: layer_norm, rms_norm, batch_norm, mha, add, ffn, ffn_hidden, ffn_out, linear, relu, select,
# identity (docs/reference/spec.md, "Custom blocks").  Try axis: T on norm1 (exercise 3: an axis violation), or
# in: [x, attention] -> in: [x, norm1] on residual1, and run again.
name: "Example 17.2, written as steps"
dims: {{C: 2, H: 2, F: 3}}   # B and T follow from the input
block:
  mask: causal
  eps: 1e-5
  steps:
    - {{name: norm1, op: layer_norm, in: x, weights: norm1}}        # axis: C, the contract
    - {{name: attention, op: mha, in: norm1, weights: attn}}        # axis: keys, the contract
    - {{name: residual1, op: add, in: [x, attention]}}
    - {{name: norm2, op: layer_norm, in: residual1, weights: norm2}}
    - {{name: hidden, op: ffn_hidden, in: norm2, weights: ffn}}     # [B,T,C] -> [B,T,F]
    - {{name: ffn, op: ffn_out, in: hidden, weights: ffn}}          # [B,T,F] -> [B,T,C]
    - {{name: output, op: add, in: [residual1, ffn]}}
input:
  tokens: [0, 1, 2]
{CHAPTER_WEIGHTS}"""

GPT2 = """\
# One GPT-2-small-sized block, every weight drawn from the seed: C = 768 coordinates, H = 12 heads
# of d = 64, F = 3072, T = 1024 positions (GPT-2's context).  X stands for token + position
# embeddings and is drawn uniformly from [-1, 1].
#   tracer run FILE                                  the table (vectors elided to 3 of 768 values)
#   tracer run FILE --stage output --format csv      every position's output, one CSV row each
# A smaller dims.T runs faster; another seed draws other weights.
name: "GPT-2-small-sized block (768 / 3072, 12 heads, 1024 positions)"
dims: {B: 1, T: 1024, C: 768, H: 12, F: 3072}
seed: 0                  # draws every weight not given: matrices uniform on [-1/sqrt(n_in), 1/sqrt(n_in)]
init: default            # or xavier: matrices uniform on [-sqrt(6/(n_in+n_out)), sqrt(6/(n_in+n_out))]
block:
  norm_order: pre        # GPT-2 normalises before each sublayer
  mask: causal
  eps: 1e-5
  activation: gelu_tanh  # GPT-2's GELU, the tanh approximation (relu | gelu | gelu_tanh | swiglu)
input:
  x: random              # [B,T,C] drawn from the seed
"""

STACK = """\
# A 2-layer decoder-only stack with a final LayerNorm and a tied output head, as the book's Mini GPT.
# Layer stages are prefixed blocks.0. and blocks.1.; logits [B,T,V] and probs follow.
#   tracer run FILE --stage blocks.1.output --stage probs     just those two stages
name: "Mini GPT: 2 pre-norm layers, final norm, tied head"
vocab: [<s>, the, cat, sat, on, mat, .]   # tokens may be written as words of the vocab
dims: {C: 8, H: 2, F: 32, T_max: 16}      # T_max: rows of the learned position table
seed: 7
block:
  norm_order: pre
  layers: 2
  mask: causal
  positions: learned     # learned | sinusoidal | rotary | none
  final_norm: true
  head: tied             # logits = h E^T, then softmax over the vocabulary (none | tied | separate)
input:
  tokens: [[<s>, the, cat, sat], [<s>, the, mat, .]]   # B = 2 samples, each traced on its own
"""

MODERN = """\
# A LLaMA-style decoder layer: RMSNorm instead of LayerNorm, rotary positions instead of a table,
# a SwiGLU FFN, a final norm and a separate output head.  Compare with the chapter's block:
#   tracer stages norm1          the same name under LayerNorm and RMSNorm
name: "Modern decoder: RMSNorm + rotary + SwiGLU"
vocab: [我, 喜欢, 你, 。]
dims: {C: 8, H: 2, F: 24}
seed: 5
block:
  norm_order: pre
  mask: causal
  norm: rmsnorm          # x / sqrt(mean(x^2) + eps) * gamma: no mean subtracted, no beta
  positions: rotary      # q and k turned pair by pair inside attention; nothing is added to X
  position_base: 10000
  activation: swiglu     # silu(x W_1 + b_1) * (x W_3 + b_3), then W_2
  final_norm: true
  head: separate         # its own [C,V] matrix, drawn from the seed
input:
  tokens: [我, 喜欢, 你]
"""

ENCODER_DECODER = """\
# An encoder-decoder (the reader's guide, section 9).  The encoder reads the source with no mask;
# each decoder layer has masked self-attention, then cross-attention whose queries come from the
# decoder and whose keys and values come from the encoder output, then the FFN.  Source positions
# are the axis S, target positions T: the cross-attention weights are [B,H,T,S].
#   tracer run FILE --all        adds attn.* and cross.* (the cross-attention weights)
#   tracer run FILE --steps      encoder.* steps, then decoder.* steps, then logits and probs
name: "Encoder-decoder: 今天 天气 真好 -> today is good"
model: encoder-decoder
vocab: [<s>, 今天, 天气, 真好, today, is, good, </s>]   # one table E for source and target
dims: {C: 8, H: 2, F: 16}
seed: 9
encoder:
  layers: 1
  norm_order: pre
  positions: sinusoidal  # mask: none is the encoder's default
  final_norm: true       # the encoder output after this norm is the memory cross-attention reads
decoder:
  layers: 1
  norm_order: pre
  positions: sinusoidal  # mask: causal is the decoder's default
  final_norm: true
  head: tied             # logits over the vocabulary, then next-token probabilities
input:
  source: [今天, 天气, 真好]        # S = 3
  target: [<s>, today, is, good]   # T = 4
"""

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("ch17", "the chapter's block, Example 17.2 (pre-norm, the book's weights)", CH17),
    Preset("custom", "the chapter's block written as its own step list (block.steps)", CUSTOM),
    Preset("gpt2", "one GPT-2-small-sized block (768 / 3072, 12 heads, 1024 positions), seeded", GPT2),
    Preset("stack", "a 2-layer stack with final norm and tied head (the book's Mini GPT)", STACK),
    Preset("modern", "RMSNorm, rotary positions, SwiGLU (a LLaMA-style decoder layer)", MODERN),
    Preset("encoder-decoder", "an encoder-decoder with cross-attention (the guide, section 9)", ENCODER_DECODER),
)}
