"""``tracer import``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli.shared import ForceOption, guarded
from tracer.errors import EXIT_OK
from tracer.messages import msg, shown

if TYPE_CHECKING:
    pass


def import_(
    checkpoint: Annotated[str, typer.Argument(metavar="CHECKPOINT", show_default=False,
                                              help="A Hugging Face model folder, a .safetensors, .npz or PyTorch .pt/.bin file, or a Hub name "
                                                   "(owner/name) in the Hugging Face cache.")],
    output: Annotated[str | None, typer.Option("--output", "-o", show_default=False,
                                               help="Write the spec to this file (replacing only a spec tracer import wrote and nobody edited since, unless "
                                                    "--force) instead of stdout.")] = None,
    layout: Annotated[str | None, typer.Option("--layout", metavar="gpt2|torch|...", show_default=False,
                                               help="How the checkpoint's tensors map onto tracer's weights. Default: config.json's model_type.")] = None,
    layers: Annotated[str | None, typer.Option("--layers", metavar="FIRST-LAST", show_default=False,
                                               help="A contiguous range of layers, e.g. 0-1 (default: all).")] = None,
    tokens: Annotated[str | None, typer.Option("--tokens", metavar="IDS", show_default=False,
                                               help="Input token ids, e.g. 464,2068,7586 (default: a seeded random input).")] = None,
    heads: Annotated[int | None, typer.Option("--heads", metavar="H", show_default=False,
                                              help="Number of heads, when the checkpoint does not record it (a PyTorch state dict, no config.json). Refused if "
                                                   "config.json says otherwise.")] = None,
    activation: Annotated[str | None, typer.Option("--activation", metavar="NAME", show_default=False,
                                                   help="The activation, when no config records it (gelu_tanh, gelu, relu, swiglu). Refused if "
                                                        "config.json says otherwise.")] = None,
    eps: Annotated[float | None, typer.Option("--eps", metavar="EPS", show_default=False,
                                              help="The norms' epsilon, when no config records it. Refused if config.json says otherwise.")] = None,
    norm_order: Annotated[str | None, typer.Option("--norm-order", metavar="pre|post", show_default=False,
                                                   help="Pre- or post-norm, for a PyTorch state dict (norm_first=True is pre; default post).")] = None,
    allow_unread: Annotated[bool, typer.Option("--allow-unread",
                                               help="Import even when the spec would leave some of the checkpoint's tensors unread in the layers it traces; "
                                                    "the spec lists them.")] = False,
    not_the_model: Annotated[bool, typer.Option("--not-the-model",
                                                help="With --layout: trace a checkpoint whose config.json names a model_type that layout does not read, "
                                                     "with the layout's maths; the spec says in its first lines and its name that it is not the checkpoint's "
                                                     "model.")] = False,
    length: Annotated[int | None, typer.Option("--length", metavar="T", show_default=False,
                                               help="Positions of the random input, when neither --tokens nor --text is given (default: 8).")] = None,
    force: ForceOption = False,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Input text, tokenized with the folder's own tokenizer.json (needs the tokenizers package: "
                                                  "the checkpoints extra).")] = None,
    no_special: Annotated[bool, typer.Option("--no-special",
                                             help="With --text: do not add the special tokens (BOS, EOS) the tokenizer's post-processor adds.")] = False,
    download: Annotated[bool, typer.Option("--download",
                                           help="With a Hub name (owner/name): fetch into the Hugging Face cache the files the import reads "
                                                "(config.json, tokenizer.json, the index, only the shards of the layers traced) when the cache "
                                                "lacks any (needs huggingface_hub: the hub extra).")] = False,
    dtype: Annotated[str, typer.Option("--dtype", metavar="float64|float32",
                                       help="What the spec computes in: float64 (default), or float32 (a float32 checkpoint read as stored, as "
                                            "Hugging Face runs it).")] = "float64",
) -> None:
    """Write a spec that traces a real checkpoint: dims and settings from its config, weights read from the file."""

    def body() -> int:
        from tracer.checkpoints.importer import import_checkpoint
        from tracer.messages import render

        result = import_checkpoint(checkpoint, output, layout, layers, tokens, heads, length, force, activation=activation, eps=eps,
                                   norm_order=norm_order, allow_unread=allow_unread, text=text, special=not no_special, dtype=dtype,
                                   download=download, not_the_model=not_the_model)
        if result.assumed:  # once, whether the spec goes to a file or to stdout
            settings = ", ".join(f"{name} {value}" for name, value in result.assumed)
            sys.stderr.write(render(msg("assumed ({why}): {settings}", why=result.why_assumed, settings=settings)) + "\n")
        if output is None:
            from tracer.process import write_file_text

            write_file_text(result.text)
        else:
            from tracer.messages import render

            sys.stderr.write(render(msg("wrote {path} ({summary}); trace it with: tracer run {path}", path=shown(output),
                                        summary=shown(result.summary))) + "\n")
        return EXIT_OK

    guarded(body)
