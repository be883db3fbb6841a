"""What a spec may write: every section's keys and every setting's choices.

The JSON Schema (tracer/spec/schema/spec.schema.json) names the same keys and choices, in the same order
(tests/spec/test_schema.py holds the two together).
"""

from __future__ import annotations

from tracer.model import rope

MAX_DIM = 10_000_000
KEYWORDS = ("identity", "zeros", "ones", "random")

TOP_KEYS = ("name", "description", "model", "vocab", "dims", "block", "encoder", "decoder", "input", "weights",
            "seed", "init", "dtype", "allow_nonfinite", "loss", "tokenizer")
DIM_KEYS = ("B", "T", "S", "C", "H", "H_kv", "F", "V", "T_max", "V_type", "C_e", "d", "K_rel", "L")
BLOCK_KEYS = ("norm_order", "steps", "layers", "mask", "eps", "norm", "activation", "positions", "position_base",
              "rotary_pairing", "rope_scaling", "rotary_dim", "final_norm", "head", "head_bias", "embedding_norm", "token_types",
              "position_offset", "ffn", "embedding_scale", "qk_norm", "attention_scale", "attention_softcap", "head_softcap",
              "relative", "head_scale", "embedding_multiplier", "residual_multiplier", "logits_divisor", "rotary_layers",
              "logit_scale", "local_position_base", "pooler", "classifier", "mlm")
CLASSIFIER_KEYS = ("task", "reads", "pad", "hidden")  # classifier: {task: sequence, reads: last, pad: 0}: a classifier's scores
CLASSIFIER_TASKS = ("sequence", "next_sentence")  # its stages: classifier.* | nsp.*
CLASSIFIER_READS = ("pooled", "first", "last")  # the pooler's output | the first position | the last token not pad
RELATIVE_KEYS = ("buckets", "max_distance")  # relative: {buckets: 32, max_distance: 128}: T5's relative position bias
FFN_KEYS = ("experts", "top_k")  # ffn: {experts: 8, top_k: 2}: a mixture of experts in place of the FFN (Mixtral's block)
MASK_KEYS = ("causal", "window", "sliding_layers")  # mask: {causal: true, window: 4}; sliding_layers: [0, 2] (Gemma 2)
ROPE_SCALING_KEYS = ("type",) + rope.LLAMA3_KEYS  # rope_scaling: {type: linear, factor: 4}
INPUT_KEYS = ("tokens", "x", "text", "targets", "token_types", "special")
SEQ2SEQ_INPUT_KEYS = ("source", "target", "targets")
INITS = ("default", "xavier")  # how drawn matrices are scaled (tracer/params.py)
LOSSES = ("next-token", "sum-squares")  # tracer grad: the scalar whose gradient is traced (tracer/grad/losses.py)
STEP_KEYS = ("name", "op", "in", "weights", "axis", "start", "stop", "index", "out", "activation", "meaning")
POSITIONS = ("learned", "sinusoidal", "rotary", "none", "relative")  # relative: T5's position bias on the scores
PAIRINGS = ("interleaved", "half")  # rotary pairs (2i, 2i+1) as in Meta's LLaMA code, or (i, i + d/2) as in Hugging Face
MODEL_FILE_KEYS = ("file", "layout", "first_layer", "allow_unread")  # weights: {file: model.safetensors, layout: gpt2}
FILE_KEYS = ("file", "key", "transpose")  # one weight: w_q: {file: w.npz, key: attn_q}
