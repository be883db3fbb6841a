"""`tracer import CHECKPOINT`: write a commented spec that references the checkpoint and runs as it is.

The family's config reader (families/) gives the dims and block settings with where each came
from; this module picks the layers asked for, the input (--tokens, or a seeded random input) and
writes the YAML.  The spec is validated before it is written (it must load exactly as written, the
checkpoint's keys and shapes included), and -o never replaces a file that `tracer import` did not
write.  A checkpoint is read whole or refused: when the spec would leave tensors of the layers it
traces unread, the import is refused naming them, unless --allow-unread (the spec then says
``allow_unread: true`` and lists them).  A setting no config gave is written ``# assumed: ...``
and listed once on stderr.  Nothing here imports NumPy.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, NamedTuple

from tracer.checkpoints import families
from tracer.checkpoints.families.base import Layout, ModelConfig, Options, config_path, grouped, named_few
from tracer.checkpoints.formats import Checkpoint, open_checkpoint
from tracer.errors import CheckpointError, UsageError
from tracer.messages import at, join, msg, nmsg
from tracer.model.blocks import TASK_WEIGHTS
from tracer.spec import yamlio

MARK = "# Written by `tracer import`"  # the first line: -o replaces only a file that starts with it


class Imported(NamedTuple):
    text: str
    summary: str  # one line for stderr: what was written
    assumed: tuple[tuple[str, Any], ...] = ()  # settings no config gave (setting, value): listed once on stderr
    why_assumed: str = ""  # "no config.json", "not in config.json", ...


def parse_layers(text: str | None, total: int) -> tuple[int, int]:
    """--layers 0-1 / 3 -> (first, last), both inclusive, checked against the checkpoint's layers."""
    if text is None:
        return 0, total - 1
    parts = text.split("-")
    try:
        first, last = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (-1, -1)
    except ValueError:
        first = last = -1
    if first < 0 or last < first:
        raise UsageError(msg('--layers {text}: expected a layer or a range such as 0-1 (first-last, counting from 0)', text=repr(text)))
    if last >= total:
        raise UsageError(nmsg("--layers {text}: the checkpoint has {n} layer (0 to {last})", "--layers {text}: the checkpoint has {n} layers (0 to {last})",
                              total, text=text, last=total - 1))
    return first, last


def parse_tokens(text: str | None, V: int | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise UsageError(msg('--tokens {text}: expected token ids separated by commas, such as 464,2068,7586', text=repr(text))) from None
    if not ids or min(ids) < 0:
        raise UsageError(msg('--tokens {text}: expected token ids 0 or more, separated by commas', text=repr(text)))
    if V is not None and max(ids) >= V:
        raise UsageError(msg('--tokens: id {max} is out of range: the embedding table has V = {V} rows (ids 0 to {x})', max=max(ids), V=V, x=V - 1))
    return ids


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value >= 1e-3 or value == 0 else f"{value:g}"
    return yamlio.scalar(value)  # text is data: quoted and escaped by the emitter wherever YAML would read it otherwise


COMMENT_COLUMN = 25


def _safe(text: str) -> str:
    """Text from a checkpoint (a tensor's name, a config value) as one comment line: control and bidi characters escaped."""
    return text if text.isprintable() else json.dumps(text)[1:-1]


def _line(text: str, note: str | None) -> str:
    return f"{text:<{COMMENT_COLUMN - 1}} # {yamlio.comment(note)}" if note else text


def _mapping(indent: str, items: dict[str, Any], notes: dict[str, str]) -> list[str]:
    return [_line(f"{indent}{k}: {_yaml(v)}", notes.get(k)) for k, v in items.items()]


def _no_layout(ckpt_path: str, ckpt: Checkpoint, config: dict[str, Any] | None) -> UsageError:
    """Why no layout was picked, suggesting only the layouts that would read the checkpoint whole."""
    model_type = (config or {}).get("model_type")
    read = ", ".join(sorted({t for lay in families.layouts().values() for t in lay.model_types}))
    why = (msg("config.json's model_type {model_type} names no layout (tracer reads {types})", model_type=repr(model_type), types=read)
           if model_type else msg("the checkpoint has no config.json"))
    if model_type:  # the config names a model no family reads: no other family's layout is suggested (it would compute another model)
        return UsageError(at(ckpt_path, why))
    tried = [(name, *_accepted(ckpt_path, ckpt, config, name)) for name in families.whole_readers(ckpt, config)]
    fits = [how for _, how, _ in tried if how is not None]
    if fits:
        return UsageError(at(ckpt_path, join([why, msg("give --layout {names}", names=" | ".join(fits))])))
    if tried:  # layouts map its tensors, and each refuses it: the first one's reason (a missing config.json, say)
        name, _, refusal = tried[0]
        return UsageError(at(ckpt_path, join([why, msg("the {layout} layout maps its tensors, and refuses it: {why}", layout=name, why=refusal)])))
    return UsageError(at(ckpt_path, join([why, msg("none of tracer's layouts ({names}) maps all of its tensors, so none would trace it whole",
                                                   names=", ".join(n for n in families.names() if n != "tracer"))])))


def _accepted(ckpt_path: str, ckpt: Checkpoint, config: dict[str, Any] | None, name: str) -> tuple[str | None, Any]:
    """``name`` as the suggestion to follow (with ``--heads H`` when the checkpoint does not record its heads), or None
    with the layout's refusal when it would refuse the checkpoint on the next try: only what would be accepted is suggested."""
    from tracer.messages import Located, render

    refusal: Any = None
    for options, shown in ((Options(), name), (Options(heads=1), f"{name} --heads H")):  # H = 1 divides every C
        try:  # the import's own first draft, loaded: every tensor's shape checked as the import would
            left = _unread(_draft(build(ckpt_path, ckpt_path, name, None, None, options, 1)[0], ckpt_path), name)
            if left:  # the import would refuse it as read in part
                return None, msg("it leaves {names} unread", names=named_few(left))
            return shown, None
        except (CheckpointError, UsageError) as e:
            refusal = e.message.body if isinstance(e.message, Located) else e.message
            if "--heads" not in render(e.message, "en"):
                break
    return None, refusal


class Where(NamedTuple):
    """Where the checkpoint was found: its title in the spec's first line and the note on weights.file."""

    title: str | None = None  # None: the checkpoint's file or folder name
    note: str = "relative to this spec's folder"


def _no_invented_head(ckpt_path: str, ckpt: Checkpoint, layout: Layout, cfg: ModelConfig) -> None:
    """Every head the checkpoint holds is read, and none is made up, with or without --allow-unread: a task head the layout maps
    but the family's reader did not take up is refused naming it; so is a checkpoint with no output head of its own that
    holds tensors outside its layers the layout maps to nothing (a classifier's score, another task's head), rather than given
    a head tied to its token table."""
    groups = {k: (layout.owner(k)[0] or "").split(".")[0] for k in layout.weight_keys(ckpt.keys())}
    unused = [k for k, g in groups.items() if g in TASK_WEIGHTS and TASK_SETTING[g] not in cfg.block]
    if unused:  # a task head the layout maps, which the family's reader did not take up for this model
        raise UsageError(at(ckpt_path, msg("holds {names}, a head the {layout} layout does not read for this model", names=named_few(unused),
                                           layout=layout.name)))
    if cfg.block.get("head") != "tied":
        return
    found = layout.locate("head", ckpt.key_set())
    if found is not None and found[1]:
        return
    extra = [k for k in layout.weight_keys(ckpt.keys()) if layout.owner(k) == (None, None) and not layout.is_harmless(k)]
    if extra:
        raise UsageError(at(ckpt_path, msg("holds no output head of its own ({key}), and holds {names}, a head the {layout} layout does not read: "
                                           "tracer does not tie a head the checkpoint does not hold to its token table",
                                           key=found[0].key if found else "lm_head", names=named_few(extra), layout=layout.name)))


def _draft(text: str, where: str) -> Any:
    """A spec `tracer import` would write, loaded (the first draft, to find what it leaves unread; then the spec itself); a
    refusal it raises names the tensor or the field, not a line of a file that is never written."""
    from tracer.errors import SpecError
    from tracer.messages import Located
    from tracer.spec import load_spec_text

    try:
        return load_spec_text(text, where)
    except SpecError as e:
        m = e.message
        if not (isinstance(m, Located) and m.where.startswith(where) and isinstance(m.body, str)):
            raise UsageError(m) from None
        field = re.sub(r"^:\d+:\d+(: )?", "", m.where[len(where):])  # the line and column of a file never written: the field alone
        raise UsageError(at(field, m.body) if field else m.body) from None


def build(ckpt_path: str, shown_path: str, layout_name: str | None, layers: str | None, tokens: str | None, options: Options,
          length: int, unread: list[str] | None = None, dtype: str = "float64", where: Where = Where(),
          tokens_from: str = "--tokens", start: Start | None = None) -> tuple[str, str, ModelConfig, str]:
    """The spec's text, a one-line summary, the config it was made from and the layout's name.

    ``unread``: None for the first draft (written with allow_unread: true, to find what it leaves unread),
    else the tensors the spec leaves unread (the spec then allows them only if there are any, and lists them).
    ``tokens_from``: the option ``tokens`` came from (--tokens, or --text tokenized), named when they cannot be the input.
    ``start``: the hidden state entering the first layer kept, which layers 0 to first - 1 made of the tokens (its x).
    """
    ckpt = open_checkpoint(ckpt_path)
    config = families.config_of(ckpt)
    name = layout_name or families.infer(config)
    if name is None:
        raise _no_layout(ckpt_path, ckpt, config)
    if name not in families.names():
        raise UsageError(msg('--layout {name}: expected one of {join}', name=repr(name), join=' | '.join(families.names())))
    layout = families.layouts()[name]
    kind = (config or {}).get("model_type")
    foreign = kind if isinstance(kind, str) and kind not in layout.model_types else None
    if options.not_the_model and foreign is None:
        raise UsageError(at("--not-the-model", msg("traces a model_type the layout does not read with the layout's maths, and {what}: leave it out",
                                                   what=msg("config.json's model_type {kind} is the {layout} layout's own", kind=repr(kind), layout=name)
                                                   if isinstance(kind, str) else msg("the checkpoint's config.json gives no model_type"))))
    cfg = layout.read_config(config, ckpt, layout, options)
    if foreign is not None and not options.not_the_model:  # read first: a model_type a family knows differs is refused saying how
        raise UsageError(at(config_path(ckpt), msg(
            "model_type {kind}: the {layout} layout reads model_type {types}; tracer traces a model only with the layout of its own "
            "model_type, as another model can hold the same tensors and compute something else with them",
            kind=repr(foreign), layout=name, types=", ".join(map(repr, layout.model_types)) or msg("none (it has no config.json)"))))
    if foreign is not None:
        cfg = cfg._replace(foreign=foreign)
    _no_invented_head(ckpt_path, ckpt, layout, cfg)
    for field, option in (("heads", "--heads"), ("activation", "--activation"), ("eps", "--eps"), ("norm_order", "--norm-order")):
        value = getattr(options, field)
        if value is not None and field not in cfg.options_used:
            raise UsageError(at(f"{option} {value}", msg("the {name} layout does not take it: its setting is fixed by the family or its config", name=name)))
    offset = int(cfg.block.get("position_offset", 0))  # RoBERTa's positions start at row padding_idx + 1
    most = cfg.dims["T_max"] - offset if "T_max" in cfg.dims else None
    if length < 1 or (most is not None and length > most):
        raise UsageError(msg("--length {length}: expected 1 to {most} positions", length=length, most=most if most is not None else "T_max"))
    title = _text_path(where.title or os.path.basename(os.path.normpath(ckpt_path)))
    shown = Shown(shown_path, where.note)
    if cfg.model == "encoder-decoder":
        if layers is not None:
            raise UsageError(msg('--layers picks layers of a decoder-only stack; an encoder-decoder is imported whole'))
        if tokens is not None and tokens_from != "--tokens":
            raise UsageError(at(tokens_from, msg("an encoder-decoder's input is its source and target ids: give the source with --tokens")))
        return (_seq2seq(cfg, title, shown, name, tokens, length, unread, dtype),
                f"{name}, encoder-decoder ({cfg.encoder_layers} + {cfg.layers} layers){_not_the_model(cfg, name)}", cfg, name)
    first, last = parse_layers(layers, cfg.layers)
    ids = parse_tokens(tokens, cfg.dims.get("V"))
    if ids is not None and cfg.input != "tokens":  # written as a random x otherwise: the ids would be dropped
        raise UsageError(at(tokens_from, msg("the {name} layout's first layer reads vectors (input x), not token ids", name=name)))
    if ids is not None and first > 0:  # import_checkpoint gives them as the start they make (layers 0 to first - 1 traced on them)
        raise UsageError(at(tokens_from, msg("token ids are the input of layer 0's token embedding, and --layers {first}-{last} starts from the hidden "
                                             "state entering layer {first}: give that state as the start", first=first, last=last)))
    if cfg.padding_token is not None and first == 0:  # RoBERTa: a padding token takes position padding_idx, not its place in the sequence
        pad = cfg.padding_token
        if ids is not None and pad in ids:
            raise UsageError(msg("--tokens: id {pad} is RoBERTa's padding token (pad_token_id), whose position Hugging Face sets to padding_idx; tracer's "
                                 "positions run from padding_idx + 1: leave it out",
                                 pad=pad))
        if ids is None:  # not drawn at random, which could draw the padding token: ids that avoid it, written out
            V = cfg.dims["V"]
            ids = [t for t in (pad + 1 + (7 * i) % max(1, V - pad - 1) for i in range(length)) if t < V]
    T_max = cfg.dims.get("T_max")
    if ids is not None and first == 0 and offset and T_max is not None and len(ids) + offset > T_max:
        raise UsageError(msg("--tokens: {n} tokens, but positions start at row {o} of the learned table of T_max = {T_max} rows; give at most {most}",
                             n=len(ids), o=offset, T_max=T_max, most=T_max - offset))
    if ids is not None and first == 0 and cfg.block.get("positions") == "learned" and T_max is not None and len(ids) > T_max:
        raise UsageError(msg("--tokens: {n} tokens, but the checkpoint has positions for {T_max} (its learned position table has T_max = {T_max} rows, "
                             "n_positions); give at most {T_max}",
                             n=len(ids), T_max=T_max))
    if start is not None and (first == 0 or ids is not None):
        raise UsageError(msg("a start is the hidden state entering layer {first}: give it without the tokens that made it", first=first))
    return (_decoder(cfg, title, shown, name, first, last, ids, length, unread, dtype, start),
            f"{name}, layers {first}-{last} of {cfg.layers}{_not_the_model(cfg, name)}", cfg, name)


def _dtype_note(stored: str, dtype: str = "float64") -> str:
    if stored == dtype:
        return "as the checkpoint stores it"
    return f"the checkpoint stores {stored}; its tensors are converted on reading"


DTYPES = ("float64", "float32")
TASK_HEADS = ("pooler", "classifier", "mlm")  # the block settings of the heads after the stack
TASK_SETTING = {"pooler": "pooler", "classifier": "classifier", "classifier_dense": "classifier", "nsp": "classifier",
                "mlm_dense": "mlm", "mlm_norm": "mlm"}  # the setting that reads each of their weight groups  # tracer import --dtype: what the run computes in


def _header(title: str, name: str, cfg: ModelConfig, what: str) -> list[str]:
    lines = [
        f"{MARK} from {yamlio.comment(title)} (layout {name}): {what}.",
        f"# Settings from {cfg.source}; the comment on each line says which. The weights stay in the checkpoint",
        "# and are read when the spec runs (only those these layers use). Edit freely: `tracer import -o` replaces",
        "# this file only while it is as tracer wrote it (the first line holds its checksum).",
    ]
    if cfg.foreign is not None:  # --not-the-model: said before anything else, as the name says it in every table
        lines[1:1] = [f"# NOT THE CHECKPOINT'S MODEL (--not-the-model): its config.json's model_type {_safe(repr(cfg.foreign))} is not one the {name} layout",
                      f"# reads; this spec computes the {name} layout's maths on its weights, which may not be what {_safe(repr(cfg.foreign))} computes."]
    if cfg.assumed:
        lines.append("# Assumed, not read from a config: " + _safe(", ".join(f"{k} {v}" for k, v in cfg.assumed)) + ".")
    return lines


def _not_the_model(cfg: ModelConfig, name: str) -> str:
    """What the spec's name adds when it is not the checkpoint's model."""
    return "" if cfg.foreign is None else f", not the checkpoint's model: its {cfg.foreign} computed as {name}"


class Start(NamedTuple):
    """The input of a trace that starts at layer first > 0 from given tokens: the hidden state entering it, as tracer traced
    layers 0 to first - 1 of the checkpoint on them."""

    rows: list[Any]  # [B,T,C] as nested lists of floats (each written as the shortest text that reads back to the same float)
    note: str  # what made it


class Shown(NamedTuple):
    path: str  # weights.file as the spec writes it
    note: str  # its comment


def _weights_lines(shown: Shown, name: str, first: int, unread: list[str] | None) -> list[str]:
    weights: dict[str, Any] = {"file": shown.path, "layout": name}
    wnotes = {"file": shown.note}
    if first:
        weights["first_layer"] = first
        wnotes["first_layer"] = f"blocks.0 of this spec is layer {first} of the checkpoint"
    if unread is None or unread:
        weights["allow_unread"] = True
        wnotes["allow_unread"] = "--allow-unread: the trace leaves these tensors out, so it is not the checkpoint's whole model:" if unread else ""
    lines = _mapping("  ", weights, wnotes)
    lines += [f"  #   {_safe(key)}" for key in grouped(unread or [])]
    return lines


def _decoder(cfg: ModelConfig, title: str, shown: Shown, name: str, first: int, last: int, ids: list[int] | None, length: int,
             unread: list[str] | None, dtype: str = "float64", start: Start | None = None) -> str:
    n = last - first + 1
    whole_end = last == cfg.layers - 1
    from_tokens = cfg.input == "tokens" and first == 0
    what = f"layers {first}-{last} of {cfg.layers}" if n != cfg.layers else f"all {cfg.layers} layers"
    lines = _header(title, name, cfg, what)
    lines.append(f"name: {yamlio.scalar(f'{title}: {what}{_not_the_model(cfg, name)}')}")
    dims = {k: v for k, v in cfg.dims.items() if from_tokens or k not in ("V", "T_max", "V_type", "C_e")}
    if not (whole_end and from_tokens):  # the task heads read the last layer's output (and the tokens' padding): left out
        dims.pop("L", None)
    notes = dict(cfg.notes)
    if not (from_tokens and ids is not None) and start is None:
        dims = {"B": 1, "T": length} | dims
        notes["T"] = "positions of the seeded random input (--length)"
    lines.append("dims:")
    lines += _mapping("  ", dims, notes)
    lines.append(_line(f"dtype: {dtype}", _dtype_note(cfg.dtype, dtype)))
    lines.append(_line("seed: 0", "draws any random input" + ("" if cfg.embedding_given or not from_tokens else " and the embedding table")))
    block = dict(cfg.block, layers=n)
    if not from_tokens:  # the embeddings' own settings act before layer 0: a trace from a hidden state has none
        for key in ("embedding_norm", "token_types", "position_offset", "embedding_scale", "embedding_multiplier"):
            block.pop(key, None)
    if not from_tokens and block.get("positions") in ("learned", "sinusoidal"):  # rotary acts inside every layer: kept
        block["positions"] = "none"
        notes["positions"] = (f"the input stands for the hidden state entering layer {first}: positions were added before layer 0"
                              if first > 0 else notes.get("positions", ""))
    tasks = [k for k in TASK_HEADS if k in block]
    if not whole_end:
        block["final_norm"] = False
        block["head"] = "none"
        notes["final_norm"] = f"left out: the final norm acts after layer {cfg.layers - 1}, which --layers leaves out"
        notes["head"] = f"left out (no logits): the head reads the last layer, {cfg.layers - 1}"
    elif not from_tokens and (block.get("head", "none") != "none" or tasks):
        block["head"] = "none"
        notes["head"] = "left out: the head needs token input, and this trace starts from a hidden state"
    if tasks and (not whole_end or not from_tokens):  # the task heads read the last layer's output (and the tokens' padding)
        for key in (*TASK_HEADS, "head_bias"):
            block.pop(key, None)
    _sliding_range(block, notes, first, last)
    _rotary_range(block, notes, first, last)
    if block.get("head") == "none":
        block.pop("head_softcap", None)  # Gemma 2's cap of the logits: no head, no logits
        block.pop("logits_divisor", None)  # Granite's logits_scaling, likewise
    lines.append("block:")
    lines += _mapping("  ", block, notes)
    lines.append("weights:")
    lines += _weights_lines(shown, name, first, unread)
    lines.append("input:")
    if start is not None:
        lines.append(_line("  x: " + json.dumps(start.rows), start.note))
    elif not from_tokens:
        why = f"stands for the hidden state entering layer {first}" if first else "an encoder layer reads vectors, not tokens"
        lines.append(_line("  x: random", f"[B,T,C] drawn from the seed; {why}"))
    elif ids is not None:
        lines.append(f"  tokens: {json.dumps(ids)}")
    else:
        lines.append(_line("  tokens: random", "ids drawn from the seed (give your own with --tokens 464,2068,7586)"))
    return "\n".join(lines) + "\n"


def _sliding_range(block: dict[str, Any], notes: dict[str, str], first: int, last: int) -> None:
    """mask.sliding_layers (Gemma 2's layer_types) for the layers --layers keeps, numbered from 0 as the spec numbers them:
    every kept layer sliding is the one window of every layer, none of them plain causal."""
    mask = block.get("mask")
    if not isinstance(mask, dict) or "sliding_layers" not in mask:
        return
    kept = [i - first for i in mask["sliding_layers"] if first <= i <= last]
    if len(kept) == last - first + 1:
        block["mask"] = {k: v for k, v in mask.items() if k != "sliding_layers"}
    elif not kept:
        block["mask"] = "causal"
    else:
        block["mask"] = dict(mask, sliding_layers=kept)
    if kept != mask["sliding_layers"]:
        notes["mask"] = notes.get("mask", "") + f"; of layers {first}-{last}: " + (f"blocks {kept} slide" if kept else "none slides")


def _rotary_range(block: dict[str, Any], notes: dict[str, str], first: int, last: int) -> None:
    """block.rotary_layers (SmolLM3's no_rope_layers) for the layers --layers keeps, numbered from 0: every kept layer
    turned is every layer's rotary positions (the setting left out)."""
    if "rotary_layers" not in block:
        return
    kept = [i - first for i in block["rotary_layers"] if first <= i <= last]
    if len(kept) == last - first + 1:
        del block["rotary_layers"]
        notes.pop("rotary_layers", None)
    elif kept != block["rotary_layers"]:
        block["rotary_layers"] = kept
        notes["rotary_layers"] = notes.get("rotary_layers", "") + f"; of layers {first}-{last}: " + (f"blocks {kept} turned" if kept else "none turned")


def _seq2seq(cfg: ModelConfig, title: str, shown: Shown, name: str, tokens: str | None, length: int, unread: list[str] | None,
             dtype: str = "float64") -> str:
    assert cfg.encoder is not None
    if cfg.target_start is not None:
        return _seq2seq_tokens(cfg, title, shown, name, tokens, length, unread, dtype)
    V = 64
    ids = parse_tokens(tokens, None)
    if ids is not None:
        V = max(V, max(ids) + 1)
    lines = _header(title, name, cfg, f"encoder-decoder, {cfg.encoder_layers} + {cfg.layers} layers")
    lines.append(f"name: {yamlio.scalar(f'{title}: encoder-decoder{_not_the_model(cfg, name)}')}")
    lines.append("model: encoder-decoder")
    dims = {"C": cfg.dims["C"], "H": cfg.dims["H"], "F": cfg.dims["F"], "V": V}
    notes = dict(cfg.notes)
    if ids is None:
        dims = {"S": length, "T": length} | dims
    lines.append("dims:")
    lines += _mapping("  ", dims, notes)
    lines.append(_line(f"dtype: {dtype}", _dtype_note(cfg.dtype, dtype)))
    lines.append(_line("seed: 0", "draws the embedding table (not in the checkpoint) and any random input"))
    for section, settings in (("encoder", dict(cfg.encoder, layers=cfg.encoder_layers)), ("decoder", dict(cfg.block))):
        lines.append(f"{section}:")
        lines += _mapping("  ", settings, notes)
    lines.append("weights:")
    lines += _weights_lines(shown, name, 0, unread)
    lines.append("input:")
    for stream in ("source", "target"):
        lines.append(f"  {stream}: {json.dumps(ids)}" if ids is not None else _line(f"  {stream}: random", "ids drawn from the seed"))
    return "\n".join(lines) + "\n"


def _seq2seq_tokens(cfg: ModelConfig, title: str, shown: Shown, name: str, tokens: str | None, length: int, unread: list[str] | None,
                    dtype: str = "float64") -> str:
    """An encoder-decoder whose checkpoint holds the token table (T5): the source is --tokens (else ids written out, 1 + 7t
    mod V), the target decoder_start_token_id and the source but its last id (labels = the source, shifted right)."""
    assert cfg.encoder is not None and cfg.target_start is not None
    V = cfg.dims["V"]
    ids = parse_tokens(tokens, V)
    notes = dict(cfg.notes)
    if ids is None:
        ids = [(1 + 7 * t) % V for t in range(length)]
    target = [cfg.target_start] + ids[:-1]
    lines = _header(title, name, cfg, f"encoder-decoder, {cfg.encoder_layers} + {cfg.layers} layers")
    lines.append(f"name: {yamlio.scalar(f'{title}: encoder-decoder{_not_the_model(cfg, name)}')}")
    lines.append("model: encoder-decoder")
    lines.append("dims:")
    lines += _mapping("  ", cfg.dims, notes)
    lines.append(_line(f"dtype: {dtype}", _dtype_note(cfg.dtype, dtype)))
    lines.append(_line("seed: 0", "draws nothing the checkpoint holds"))
    for section, settings in (("encoder", dict(cfg.encoder, layers=cfg.encoder_layers)), ("decoder", dict(cfg.block))):
        lines.append(f"{section}:")
        for k, v in settings.items():
            if isinstance(v, dict):
                lines.append(_line(f"  {k}: {{{', '.join(f'{a}: {_yaml(b)}' for a, b in v.items())}}}", notes.get(k)))
            else:
                lines.append(_line(f"  {k}: {_yaml(v)}", notes.get(k)))
    lines.append("weights:")
    lines += _weights_lines(shown, name, 0, unread)
    lines.append("input:")
    lines.append(_line(f"  source: {json.dumps(ids)}", "--tokens" if tokens is not None else "ids 1 + 7t mod V (give your own with --tokens)"))
    lines.append(_line(f"  target: {json.dumps(target)}", "decoder_start_token_id, then the source but its last id (the source as labels, shifted right)"))
    return "\n".join(lines) + "\n"


def _text_path(path: str) -> str:
    """A path as the spec's UTF-8 text writes it (in the C locale too), or a UsageError if no spec can."""
    from tracer import reading

    try:
        return reading.text_path(path)
    except reading.InputRefused as e:
        raise UsageError(at(path.encode("ascii", "backslashreplace").decode("ascii"), e.message)) from None


def import_checkpoint(checkpoint: str, output: str | None, layout: str | None = None, layers: str | None = None,
                      tokens: str | None = None, heads: int | None = None, length: int | None = None, force: bool = False,
                      activation: str | None = None, eps: float | None = None, norm_order: str | None = None,
                      allow_unread: bool = False, text: str | None = None, special: bool = True, dtype: str = "float64",
                      download: bool = False, not_the_model: bool = False) -> Imported:
    """Build the spec for ``checkpoint``, check that it loads and reads the checkpoint whole (or ``allow_unread``),
    and write it to ``output`` (or return it for stdout).  ``checkpoint``: a path, else a Hub name (owner/name) found in
    the Hugging Face cache (``download``: what the import reads fetched into it when it lacks any).  ``text``: the input,
    tokenized with the folder's own tokenizer.json (``special``: with the special tokens its post-processor adds).
    ``dtype``: what the spec computes in (float64, or float32: a float32 checkpoint then read as stored)."""
    if dtype not in DTYPES:
        raise UsageError(msg("--dtype {dtype}: expected one of {names}", dtype=repr(dtype), names=" | ".join(DTYPES)))
    from tracer.files import check_output, text_mark, write_atomic

    options = _options(heads, activation, eps, norm_order)._replace(not_the_model=not_the_model)
    if length is not None and (tokens is not None or text is not None):
        raise UsageError(at("--length", msg("sets the positions of the random input, and {option} gives the input: give one",
                                            option="--tokens" if tokens is not None else "--text")))
    if force and output is None:
        raise UsageError(at("--force", msg("lets -o replace a file tracer did not write, and the spec goes to stdout: give -o too")))
    length = 8 if length is None else length
    checkpoint, found = _located(checkpoint, layout, layers, download)
    if found.title is not None:  # the cache's snapshot, written as an absolute path: the spec runs from any folder
        shown = checkpoint
    elif output is not None:
        folder = os.path.dirname(os.path.abspath(output))
        shown = os.path.relpath(os.path.abspath(checkpoint), folder)
    else:
        shown = checkpoint
    if output is not None:
        check_output(output, "-o", [checkpoint], "yaml", force)
    where = output if output is not None else "<stdout>"
    said = None
    if text is not None:
        tokens, said = _text_tokens(checkpoint, shown, tokens, text, special, output)
    elif not special:
        raise UsageError(msg("--no-special says whether the tokenizer adds its special tokens to --text: give --text too"))
    given = "--tokens" if said is None else "--text"
    start = None
    if tokens is not None and layers is not None and parse_layers(layers, 1 << 62)[0] > 0:
        start = _start(checkpoint, layout, layers, tokens, options, allow_unread, dtype, given, text)
        tokens, said = None, None
    try:
        draft, _, _, name = build(checkpoint, _text_path(shown), layout, layers, tokens, options, length, dtype=dtype, where=found, tokens_from=given,
                                  start=start)
        left = _unread(_draft(draft, where), name)
        if left and not allow_unread:
            raise UsageError(at(checkpoint, nmsg(
                "the {layout} layout leaves {n} of its tensors unread in what the spec would trace: {names}; tracer would trace a model without it (give "
                "--allow-unread to import it anyway, and the spec says so)",
                "the {layout} layout leaves {n} of its tensors unread in what the spec would trace: {names}; tracer would trace a model without them (give "
                "--allow-unread to import it anyway, and the spec says so)",
                len(left), layout=name, names=named_few(left))))
        text, summary, cfg, _ = build(checkpoint, _text_path(shown), layout, layers, tokens, options, length, left, dtype, found, given, start)
    except CheckpointError as e:
        raise UsageError(e.message) from None
    if said is not None:
        text = _with_text(text, said)
    _draft(text, where)  # it runs as written, or nothing is written (a refusal naming the tensor or the field)
    if output is not None:
        body = text.encode("utf-8")
        write_atomic(output, lambda fh: fh.write(text_mark("yaml", body) + body), "-o", "yaml", force)
    return Imported(text, summary, cfg.assumed, cfg.assumed_why)


def _start(checkpoint: str, layout: str | None, layers: str, tokens: str, options: Options, allow_unread: bool, dtype: str, given: str,
           text: str | None) -> Start:
    """--tokens (or --text) with --layers from layer first > 0: the hidden state entering that layer, traced by tracer through
    layers 0 to first - 1 of the checkpoint from these tokens (imported as layers 0 to first - 1 are, refused as they would be)."""
    from tracer.front.run_trace import trace

    first = parse_layers(layers, 1 << 62)[0]
    before = import_checkpoint(os.path.abspath(checkpoint), None, layout, f"0-{first - 1}", tokens, options.heads, None, False, activation=options.activation,
                               eps=options.eps, norm_order=options.norm_order, allow_unread=allow_unread, dtype=dtype,
                               not_the_model=options.not_the_model)
    if "\n  allow_unread: true" in before.text:  # the start would be made without them, and the spec could not list them
        raise UsageError(at("--allow-unread", msg("layers 0-{last} make the start of --layers {layers} from {option}, and leave tensors unread: tracer "
                                                  "makes a start only from layers read whole", last=first - 1, layers=layers, option=given)))
    stage = "output" if first == 1 else f"blocks.{first - 1}.output"  # a one-layer spec's stages have no blocks.0 prefix
    x = trace(_draft(before.text, f"the trace of layers 0-{first - 1}"), record="main", keep=[stage])[stage]
    made = f"--text {yamlio.comment(repr(text))} (ids {tokens})" if text is not None else f"--tokens {tokens}"
    return Start(x.tolist(),
                 _safe(f"[B,T,C]: the hidden state entering layer {first}, tracer's trace of layers 0-{first - 1} of the checkpoint on {made}"))


# -- a Hub name (owner/name): the Hugging Face cache's snapshot --------------------
def _located(checkpoint: str, layout: str | None, layers: str | None, download: bool) -> tuple[str, Where]:
    """The checkpoint's path: ``checkpoint`` itself when it exists (or is not written as a Hub name), else the cache's
    snapshot of the Hub model it names (fetched first with ``download``: only the shards the import reads)."""
    from tracer.checkpoints import hub

    if os.path.lexists(checkpoint) or not hub.is_name(checkpoint):
        if download:
            raise UsageError(at("--download", msg("fetches a model the Hugging Face Hub names (owner/name), but {path} is a path",
                                                  path=repr(checkpoint))))
        return checkpoint, Where()

    def choose(weight_map: dict[str, str], config: dict[str, Any] | None) -> set[str]:
        name = layout or families.infer(config)
        if name not in families.layouts():  # no layout reads it: the import says so from the index alone
            return set()
        span = None if layers is None else (lambda total: parse_layers(layers, total))
        return hub.needed_shards(weight_map, families.layouts()[name], span)

    snap = hub.download(checkpoint, choose) if download else hub.snapshot(checkpoint)
    if snap is None:
        raise hub.not_found(checkpoint)
    return snap, Where(checkpoint, f"the Hugging Face cache's snapshot of {checkpoint} (refs/main when imported)")


# -- --text, tokenized with the folder's own tokenizer.json ------------------------
def _text_tokens(checkpoint: str, shown: str, tokens: str | None, text: str, special: bool, output: str | None) -> tuple[str, tuple[str, str, bool, list[str]]]:
    """--text as the --tokens its tokenizer makes, and what the spec says instead of them (tokenizer path, text, special, added)."""
    from tracer.checkpoints.tokenizer import encode, load

    if tokens is not None:
        raise UsageError(msg("--text and --tokens both give the input: give one"))
    folder = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)
    file = os.path.join(folder, "tokenizer.json")
    if not os.path.lexists(file):
        raise UsageError(at(checkpoint, msg("--text is tokenized with the checkpoint's own tokenizer.json, and there is none beside it")))
    enc = encode(load(file), text, special)
    if not enc.ids:
        raise UsageError(msg("--text: the tokenizer makes no token of this text"))
    rel = os.path.join(shown if os.path.isdir(checkpoint) else os.path.dirname(shown), "tokenizer.json")
    return ",".join(map(str, enc.ids)), (_text_path(rel), text, special, list(enc.added))


def _with_text(spec_text: str, said: tuple[str, str, bool, list[str]]) -> str:
    """The spec with its input.tokens given as the text they were made from, and the tokenizer that makes them."""
    rel, text, special, added = said
    if "\n  tokens: [" not in spec_text:
        raise UsageError(msg("--text is the input of the first layer's token embedding: an import that starts from a hidden state (--layers from 1, "
                             "an encoder) takes none"))
    out = []
    for line in spec_text.splitlines():
        if line.startswith("  tokens: ["):
            note = (f"the tokenizer adds {', '.join(added)}" if added else "no special token added") + ("" if special else " (--no-special)")
            out.append(_line(f"  text: {yamlio.scalar(text)}", _safe(note)))
            if not special:
                out.append("  special: false")
            continue
        if line == "input:":
            out.append(_line(f"tokenizer: {yamlio.scalar(rel)}", "relative to this spec's folder: input.text is tokenized with it"))
        out.append(line)
    return "\n".join(out) + "\n"


def _options(heads: int | None, activation: str | None, eps: float | None, norm_order: str | None) -> Options:
    """The command line's stand-ins for a config, each checked before anything is read."""
    import math

    from tracer.model.activations import spec_activations

    if activation is not None and activation not in spec_activations():
        raise UsageError(msg("--activation {name}: expected one of {join}", name=repr(activation), join=" | ".join(spec_activations())))
    if eps is not None and not (math.isfinite(eps) and eps > 0):
        raise UsageError(msg("--eps {eps}: expected a positive number, such as 1e-5", eps=eps))
    if norm_order is not None and norm_order not in ("pre", "post"):
        raise UsageError(msg("--norm-order {name}: expected one of {join}", name=repr(norm_order), join="pre | post"))
    return Options(heads, activation, eps, norm_order)


def _unread(spec: Any, layout_name: str) -> list[str]:
    """The checkpoint's tensors the loaded draft leaves unread in what it traces (see refs.unread)."""
    from tracer.checkpoints import refs

    read = [w.value for w in spec.weights.values() if w.source == "file" and isinstance(w.value, refs.TensorRef)]
    if not read:
        return []
    src = refs.ModelSource(open_checkpoint(read[0].file), families.layouts()[layout_name], 0, "")
    return refs.unread(src, read, spec.block.head == "tied")
