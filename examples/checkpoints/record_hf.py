"""Record a Hugging Face causal LM's own forward under tracer's stage names, for `tracer diff SPEC FILE.npz` (needs torch).

    python examples/checkpoints/record_hf.py FOLDER OUT.npz --tokens 5,17,42,3

loads FOLDER (a save_pretrained folder, such as examples/checkpoints/tiny_hf.py writes) in float64 with eager attention,
runs it on the tokens and writes OUT.npz: embed (the first hidden state), each layer's attention weights
(blocks.N.attn.weights) and output (blocks.N.output, from a forward hook), final_norm (the last hidden state) and logits.
Then `tracer import FOLDER --tokens ... -o spec.yaml` and `tracer diff spec.yaml OUT.npz` compare the two stage by stage.
"""

from __future__ import annotations

import argparse

import numpy as np


def record(folder: str, out: str, ids: list[int]) -> dict[str, np.ndarray]:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager").eval()
    outputs: list[np.ndarray] = []
    hooks = [layer.register_forward_hook(lambda mod, args, res: outputs.append((res[0] if isinstance(res, tuple) else res).numpy()))
             for layer in model.model.layers]
    try:
        with torch.no_grad():
            res = model(torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    arrays = {"embed": res.hidden_states[0].numpy(), "final_norm": res.hidden_states[-1].numpy(), "logits": res.logits.numpy()}
    for i, (weights, output) in enumerate(zip(res.attentions, outputs)):
        arrays[f"blocks.{i}.attn.weights"] = weights.numpy()
        arrays[f"blocks.{i}.output"] = output
    np.savez(out, **arrays)
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder")
    parser.add_argument("out")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids, as tracer import --tokens takes them")
    args = parser.parse_args()
    arrays = record(args.folder, args.out, [int(t) for t in args.tokens.split(",")])
    print(f"wrote {args.out}: {', '.join(arrays)}")


if __name__ == "__main__":
    main()
