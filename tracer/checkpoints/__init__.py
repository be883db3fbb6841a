"""Real checkpoints: weights read from files, and `tracer import`.

- formats.py: open a checkpoint lazily (.safetensors, .npz, .npy, a Hugging Face model folder,
  sharded or not, and PyTorch .pt/.bin through torch.load(weights_only=True) when torch is
  installed); headers are read without NumPy, one tensor at a time on demand.
- layouts.py: a layout is data, a table of tracer weight names -> checkpoint keys plus small named
  conversions (split a packed q/k/v, transpose an nn.Linear [out,in]).
- hfconfig.py: one function per layout reads config.json (or the tensor shapes) into the spec's own
  dims and block settings, each with a note of where it came from.
- refs.py: what spec.py and params.py call: find and check a weight's tensor at validation (key,
  shape, dtype; every error with the spec's file:line:col), read it when the run starts.
- importer.py: `tracer import CHECKPOINT`: a commented spec that references the checkpoint.

Adding a layout (e.g. llama) is one table and one config-reading function:
1. In layouts.py, write ``_llama_table()``: ``{"blocks.{i}.attn.w_q": Take("model.layers.{i}.self_attn.q_proj.weight",
   transpose=True), ...}``; tracer's weight names are those of ``tracer stages`` / GROUP_KEYS, with
   ``{i}`` for the layer; ``Take(key, split=, part=, axis=, transpose=)`` says how the stored tensor
   becomes tracer's [in, out] matrix.  ``aliases`` lists other prefixes a checkpoint may use.
2. In hfconfig.py, write ``llama(config, ckpt, layout, heads) -> ModelConfig``: dims and block
   settings from config.json (``shape_of`` gives a weight's shape), and a note for each.
3. Register ``Layout("llama", summary, _llama_table(), hfconfig.llama, aliases, model_types=("llama",
   "mistral"))`` in ``_layouts()``; `tracer import --layout llama` and ``weights: {file: ..., layout: llama}``
   then work, and config.json's model_type picks it when --layout is left out.
Nothing in this package imports NumPy at module level: `tracer validate` checks checkpoint weights
from the headers alone.
"""
