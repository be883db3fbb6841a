"""Real checkpoints: weights read from files, and `tracer import`.

- formats.py: open a checkpoint lazily (.safetensors, .npz, .npy, a Hugging Face model folder,
  sharded or not, and PyTorch .pt/.bin through torch.load(weights_only=True) when torch is
  installed); headers are read without NumPy, one tensor at a time on demand.
- families/: one file per checkpoint family (gpt2.py, llama.py, pytorch.py, tracer_npz.py), each
  its layout table (tracer weight names -> checkpoint keys plus small named conversions: split a
  packed q/k/v, transpose an nn.Linear [out,in]) and its config reader (config.json or the tensor
  shapes -> the spec's dims and block settings, each with a note of where it came from, refusing
  what tracer cannot trace faithfully); base.py holds what they share (Take, Layout, ModelConfig, and
  Family, the config reader every family declares against); families/__init__.py is the registry
  (``--layout`` names, config.json model_types).
- refs.py: what spec.py and params.py call: find and check a weight's tensor at validation (key,
  shape, dtype; every error with the spec's file:line:col), say which tensors a spec leaves unread
  (a checkpoint is read whole, or refused), read them when the run starts.
- importer.py: `tracer import CHECKPOINT`: a commented spec that references the checkpoint.

Adding a family (e.g. llama) is one file, one line in the registry, and its tests:
1. families/llama.py: ``table()``: ``{"blocks.{i}.attn.w_q": Take("model.layers.{i}.self_attn.q_proj.weight",
   transpose=True), ...}``; tracer's weight names are those of ``tracer stages`` / GROUP_KEYS, with
   ``{i}`` for the layer; ``Take(key, split=, part=, axis=, transpose=)`` says how the stored tensor
   becomes tracer's [in, out] matrix.
2. In the same file, ``LLAMA_READS = Family(...)``: the config.json fields it reads (``Field``: type, default,
   the spec setting it becomes), the values it refuses (``Refusal``), the tensors its sizes come from;
   ``read_config(config, ckpt, layout, options) -> ModelConfig`` reads them (``LLAMA_READS.read(...)``, a
   ``Reading``) and holds what is the family's own: its other rules, its dims and block settings and
   a note for each (docs/contributing.md, "How to add a checkpoint family"); and
   ``LAYOUT = Layout("llama", summary, table(), read_config, aliases, model_types=("llama", "mistral"))``,
   where ``aliases`` lists other prefixes a checkpoint may use.
3. Add ``llama.LAYOUT`` to FAMILIES in families/__init__.py; `tracer import --layout llama` and
   ``weights: {file: ..., layout: llama}`` then work, and config.json's model_type picks it when
   --layout is left out.  tests/checkpoints/test_checkpoints.py checks that every family has its parts.
Nothing in this package imports NumPy at module level: `tracer validate` checks checkpoint weights
from the headers alone.
"""
