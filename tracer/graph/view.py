"""Figure 17.1 in the terminal (``tracer graph SPEC``): the block drawn from the spec's own step list.

Before the block: token and position rows, added into X.  Then each residual
path: the stage the path starts from (┬), every step through it with the
shape it leaves ([B,T,C] -> [B,H,T,d] -> [B,H,T,T] -> ... -> [B,T,C]), and the
add (⊕) where the untouched stage joins again.  A custom block, a stack and an
encoder-decoder are drawn from their own steps, so what is drawn is what runs.
Shapes come from ``spec.stage_shapes``: nothing is run.  A step that breaks a contract is marked with
what the run will flag there (tracer.spec.preflight, the checks `tracer validate` makes too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracer.i18n import tr
from tracer.messages import Located, Message, msg, nmsg, render
from tracer.model.activations import ACTIVATIONS, activation_of
from tracer.model.blocks import ATTN_MEANINGS, ENCODER, Step, internal_prefix, position_axis, scores_meaning, softcapped_scores
from tracer.model.contracts import kind_word
from tracer.model.ops import OPS, TABLES
from tracer.model.shapes import shape_label
from tracer.spec import Spec

ORDINALS = (msg("first residual path"), msg("second residual path"), msg("third residual path"), msg("fourth residual path"),
            msg("fifth residual path"), msg("sixth residual path"), msg("seventh residual path"), msg("eighth residual path"),
            msg("ninth residual path"), msg("tenth residual path"))
MASKS = {"causal": msg("causal mask"), "explicit": msg("explicit mask")}
NO_MASK = msg("no mask")
ENTRY = ("embed", "input", "position", "x", "embeddings", "token_type", "typed",  # BERT: E + P + E_type, then X = LN(...)
         "project_in",  # OPT: the C_e-wide embedding projected to C
         "position_bias")  # T5: the stack's relative position bias, made once before its layers
EXIT = ("final_norm", "logits", "probs", "project_out",  # OPT: back to C_e before the head
        "raw_logits",  # Gemma 2: the logits before their soft cap
        "head_scale",  # T5: the output times C^-1/2 before the tied head
        "cls", "pooled")  # BERT's pooler
TASK_STAGES = ("classifier.", "nsp.", "mlm.")  # the task heads' stages after the stack (block.classifier, block.mlm)
PREFIX = re.compile(r"^((?:encoder|decoder)\.)?(blocks\.(\d+)\.)?")
MAX_LAYERS_DRAWN = 4  # a deeper stack draws its first and last layer and says how many are between
RAIL = {"": "  ", "source": "┬ ", "through": "│ ", "add": "⊕ "}
COLUMNS = ("", "stage", "shape", "computes", "stored weights")


@dataclass
class Row:
    rail: str  # "" | source | through | add
    stage: str  # the recorded stage ('' for a shape inside a step that no stage records)
    computes: str
    shape: str
    meaning: str
    weights: str = ""
    kind: str = "step"  # step | internal | unrecorded | input
    warning: str = ""


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)
    note: str = ""
    kind: str = "path"  # entry | path | exit | stream | skipped | branch
    branches: list[Section] = field(default_factory=list)  # a parallel residual: the two branches, drawn side by side
    after: list[Row] = field(default_factory=list)  # with branches: the rows below them (the branches' sum, the add)


def graph_template(template: str) -> str:
    """An op's graph template as the catalogue of messages keys it: a format spec dropped ({base:g} -> {base}, filled formatted)."""
    return template.replace("{base:g}", "{base}")


def hidden_formula(step: Step) -> str:
    """The FFN's hidden layer: act(x W_1 + b_1), or a gated FFN's product, its gate named as diff's expressions name it."""
    x = step.inputs[0]
    record = activation_of(step.activation)
    if record.gate is not None:  # SwiGLU: (SiLU(x W_1 + b_1) * (x W_3 + b_3)); Gemma's GeGLU: the gate through the tanh GELU
        return f"({ACTIVATIONS[record.gate].expr}({x} W_1 + b_1) * ({x} W_3 + b_3))"
    return f"{record.label}({x} W_1 + b_1)"


# -- reading the step list ---------------------------------------------------
class Graph:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.steps = spec.steps
        self.index = {s.name: i for i, s in enumerate(spec.steps)}
        self.by_name = {s.name: s for s in spec.steps}

    def shape(self, stage: str) -> str:
        return shape_label(*self.spec.stage_shapes[stage])

    def is_ancestor(self, a: str, b: str) -> bool:
        """Does stage b (transitively) read stage a?  Steps are in order, so the search stops before a."""
        if a not in self.index:
            return False
        floor = self.index[a]
        seen: set[str] = set()
        todo = [b]
        while todo:
            name = todo.pop()
            step = self.by_name.get(name)
            if step is None or name in seen:
                continue
            seen.add(name)
            for i in step.inputs:
                if i == a:
                    return True
                if self.index.get(i, -1) > floor:
                    todo.append(i)
        return False

    def residual(self, step: Step) -> tuple[str, str] | None:
        """(skip, main) for an add that adds a stage back to something computed from it."""
        if step.op != "add":
            return None
        a, b = step.inputs
        if self.is_ancestor(a, b):
            return a, b
        if self.is_ancestor(b, a):
            return b, a
        return None

    # -- rows -------------------------------------------------------------
    def weights(self, group: str | None, keys: tuple[str, ...]) -> str:
        """'attn.w_q/w_k/w_v [C,C] = [2,2]; attn.b_q/b_k/b_v [C] = [2]': the stored values a step reads."""
        if group is None:
            return ""
        found: dict[tuple[tuple[str, ...], tuple[int, ...]], list[str]] = {}
        for key in keys:
            w = self.spec.weights.get(f"{group}.{key}")
            if w is not None:
                found.setdefault((w.axes, w.shape), []).append(key)
        return "\n".join(f"{group}.{'/'.join(names)} {shape_label(*shape)}" for shape, names in found.items())

    def table(self, name: str) -> str:  # names and shapes only
        w = self.spec.weights.get(name)
        return f"{name} {shape_label(w.axes, w.shape)}" if w is not None else ""

    def step_weights(self, step: Step) -> str:
        op = OPS[step.op]
        if op.weights in TABLES:  # embedding, position, head: a table of its own
            if step.op == "relative_bias":  # T5: each stack's own table
                return self.table(step.weights or "relative_bias")
            if step.op == "head" and self.spec.block.head == "tied":
                return msg("{e} (tied: logits use Eᵀ)", e=self.table("embedding"))
            return self.table(op.weights)
        return self.weights(step.weights, op.graph_weights)

    def computes(self, step: Step) -> str:
        """What the step does, in the book's notation where it has one: its record's ``graph`` template, filled in."""
        ins = step.inputs
        x = ins[0] if ins else ""
        rotary: Message | str = ""
        if step.base is not None:
            base = f"{step.base:g}"
            rotary = msg(", rotary base {base}, pairs (i, i + d/2)", base=base) if step.pairing == "half" else msg(", rotary base {base}", base=base)
            if step.rotary_dim is not None:  # partial rotary: d becomes r in the pairs, the rest of each head passes
                pairs = "(i, i + r/2)" if step.pairing == "half" else "(2i, 2i+1)"
                rotary = msg(", rotary base {base}, pairs {pairs} within the first r = {r} of each head's d coordinates", base=base, pairs=pairs,
                             r=step.rotary_dim)
        if step.qk_norm and step.qk_projection:  # OLMo 2: q and k RMS-normalised over their whole projections before the split
            rotary = msg("{rotary}, q and k RMS-normalised over their whole projections (q_norm, k_norm)", rotary=rotary)
        elif step.qk_norm:  # Qwen3: q and k RMS-normalised per head before the turn
            rotary = msg("{rotary}, q and k RMS-normalised per head (q_norm, k_norm)", rotary=rotary)
        rel = step.relative or (0, 0, False)  # positions: relative (T5): buckets, max_distance, bidirectional
        return msg(graph_template(OPS[step.op].graph), buckets=rel[0], distance=rel[1],
                   direction=msg(", both directions") if rel[2] else msg(", keys before the query only"),
                   x=x, a=x, b=ins[1] if len(ins) > 1 else "", hidden=hidden_formula(step) if step.op in ("ffn", "ffn_hidden") else "",
                   axis=step.axis or "C", out=step.out or "C", start=step.start, stop=step.stop, stream=step.stream or "x",
                   base=f"{step.base or 0.0:g}", pos=position_axis(step.name), ins=", ".join(ins), mask=self.mask(step), rotary=rotary,
                   over=msg(", softmax over queries") if step.axis == "queries" else "", cap=f"{step.softcap or 0.0:g}",
                   scale=f"{step.scale or 0.0:g}", tokens=msg("{stream} tokens", stream=step.stream) if step.stream in ("source", "target") else msg("tokens"),
                   act=activation_of(step.activation).label if step.op == "dense" else "",
                   head=("Eᵀ" if self.spec.block.head == "tied" else "W_head") + (" + b_head" if self.spec.block.head_bias else ""))

    def mask(self, step: Step) -> Message:
        if step.mask == "causal" and step.window is not None:
            return msg("sliding-window causal mask, W = {w}", w=step.window)
        return NO_MASK if step.op == "cross_mha" or step.mask in (None, "none") else MASKS.get(step.mask or "", msg("{mask} mask", mask=step.mask))

    def warning(self, step: Step) -> str:
        """The first contract the step breaks, as the run words it (static.py: the checks validate makes too)."""
        from tracer.spec.preflight import step_violations

        found = step_violations(self.spec, step)
        if not found:
            return ""
        v = found[0]
        m = v.message
        fact = m.body if isinstance(m, Located) and m.where == v.stage else m.removeprefix(f"{v.stage}: ")
        return msg("{kind} violation when run: {fact}", kind=kind_word(v.kind), fact=fact)

    def step_row(self, step: Step, rail: str) -> Row:
        return Row(rail, step.name, self.computes(step), self.shape(step.name), step.meaning, self.step_weights(step),
                   warning=self.warning(step))

    def rows(self, step: Step, rail: str) -> list[Row]:
        """A step's rows: attention shows its internals first; a one-stage FFN its unrecorded hidden shape."""
        out: list[Row] = []
        if step.op in ("mha", "cross_mha"):
            out += self.attention_rows(step, rail)
        elif step.op == "ffn":
            axes, sizes = self.spec.stage_shapes[step.inputs[0]]
            out.append(Row(rail, "", hidden_formula(step), shape_label(axes[:-1] + ("F",), sizes[:-1] + (self.spec.dims.F,)),
                           msg("FFN hidden layer, inside the step (not recorded)"), kind="unrecorded"))
        out.append(self.step_row(step, rail))
        return out

    def attention_rows(self, step: Step, rail: str) -> list[Row]:
        p = internal_prefix(step)
        g = step.weights
        shapes = self.spec.stage_shapes
        rotary = step.base is not None
        normed = bool(step.qk_norm)  # block.qk_norm: q and k RMS-normalised per head, then turned
        qk_weights = ("q_norm", "k_norm") if normed else ()

        def turned(meaning: Message) -> Message:
            if normed:
                meaning = msg("{meaning}, RMS-normalised per head", meaning=meaning)
            return msg("{meaning}, turned by rotary positions", meaning=meaning) if rotary else meaning

        def norm_said(computes: Message, which: str = "q, k") -> Message:
            return msg("{computes}; {which} RMS-normalised per head over d", computes=computes, which=which) if normed else computes

        rows: list[Row] = []
        if shapes[f"{p}.q"] == shapes[f"{p}.k"] and step.op == "mha":
            h = self.spec.dims.H
            computes = (msg("{x} W_Q, W_K, W_V; split into H = {h} heads; q, k turned (rotary)", x=step.inputs[0], h=h) if rotary
                        else msg("{x} W_Q, W_K, W_V; split into H = {h} heads", x=step.inputs[0], h=h))
            rows.append(Row(rail, f"{p}.q/k/v", norm_said(computes), self.shape(f"{p}.q"), turned(msg("queries, keys, values, split into heads")),
                            self.weights(g, ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v") + qk_weights), kind="internal"))
        else:
            memory = step.inputs[-1]
            rows.append(Row(rail, f"{p}.q", norm_said(msg("{x} W_Q; split into heads", x=step.inputs[0]), "q"), self.shape(f"{p}.q"),
                            turned(ATTN_MEANINGS["q"]), self.weights(g, ("w_q", "b_q") + qk_weights[:1]), kind="internal"))
            dims = self.spec.dims
            kv = (msg("{m} W_K, W_V; split into H_kv = {hkv} heads, each read by H / H_kv = {g} query heads", m=memory, hkv=dims.H_kv,
                      g=dims.H // dims.H_kv)
                  if dims.H_kv is not None else msg("{m} W_K, W_V; split into heads", m=memory))  # grouped-query attention
            rows.append(Row(rail, f"{p}.k/v", norm_said(kv, "k"), self.shape(f"{p}.k"),
                            turned(msg("keys and values from {m}", m=memory)), self.weights(g, ("w_k", "w_v", "b_k", "b_v") + qk_weights[1:]), kind="internal"))
        scores = "q kᵀ / √d" if step.scale is None else f"q kᵀ · {step.scale:g}"  # block.attention_scale
        if step.op == "mha" and len(step.inputs) > 1:  # positions: relative: the stack's position bias added
            scores += f" + {step.inputs[1]}"
        if step.softcap is not None:  # Gemma 2's block.attention_softcap: the scores capped before the mask
            rows.append(Row(rail, f"{p}.scores", msg("cap · tanh({scores} / cap), cap = {cap}", scores=scores, cap=f"{step.softcap:g}"),
                            self.shape(f"{p}.scores"), softcapped_scores(step), kind="internal"))
        else:
            rows.append(Row(rail, f"{p}.scores", scores, self.shape(f"{p}.scores"), scores_meaning(step), kind="internal"))
        softmax = (msg("{mask}; softmax over queries", mask=self.mask(step)) if step.axis == "queries"
                   else msg("{mask}; softmax over keys", mask=self.mask(step)))
        rows.append(Row(rail, f"{p}.weights", softmax, self.shape(f"{p}.weights"), ATTN_MEANINGS["weights"], kind="internal"))
        axes, sizes = shapes[f"{p}.q"]
        rows.append(Row(rail, "", msg("weights @ v, per head"), shape_label(axes, sizes), msg("values mixed by the weights (not recorded)"),
                        kind="unrecorded"))
        rows.append(Row(rail, f"{p}.heads", msg("concatenate the heads"), self.shape(f"{p}.heads"), ATTN_MEANINGS["heads"], kind="internal"))
        return rows

    # -- sections ---------------------------------------------------------
    def groups(self) -> list[tuple[str, str, int | None, list[Step]]]:
        """Consecutive steps by (kind, stack, layer): entry, layer i, exit."""
        out: list[tuple[str, str, int | None, list[Step]]] = []
        key: tuple[str, str, int | None]
        for step in self.steps:
            m = PREFIX.match(step.name)
            assert m is not None
            stack, rest = m.group(1) or "", step.name[m.end():]
            if m.group(2):
                key = ("layer", stack, int(m.group(3)))
            elif rest in ENTRY:
                key = ("entry", stack, None)
            elif step.op in ("head", "softmax", "softcap", "divide") and out and out[-1][0] == "exit":
                key = out[-1][:3]  # the output head belongs with the decoder's final norm
            elif rest in EXIT or step.op in ("head", "softmax", "softcap", "divide") or rest.startswith(TASK_STAGES):
                key = ("exit", stack, None)
            else:
                key = ("layer", stack, None)
            if out and out[-1][:3] == key:
                out[-1][3].append(step)
            else:
                out.append((*key, [step]))
        return out

    def plain_section(self, title: Message, kind: str, steps: list[Step]) -> Section:
        """A section without a residual path: 'before the block', 'after the stack'."""
        return Section(title, [r for step in steps for r in self.rows(step, "")], kind=kind)

    def entry_section(self, stack: str, steps: list[Step]) -> Section:
        title = msg("{stack}: before the block", stack=stack.rstrip(".")) if stack else msg("before the block")
        s = self.plain_section(title, "entry", steps)
        ops = {st.op for st in steps}
        if "add_position" in ops:
            s.note = msg("Positions are added here, before the block: a position is not a token appended to the sequence.")
        elif "relative_bias" in ops:
            s.note = msg("Relative positions: no position vectors are added; the position bias is added to the scores of every self-attention of the stack.")
        elif any(st.base is not None for st in self.steps if st.op in ("mha", "cross_mha") and st.name.startswith(stack)):
            s.note = msg("Rotary positions: no position vectors are added; q and k are turned inside each attention.")
        else:
            s.note = msg("No positions: the block cannot tell the order of the tokens.")
        return s

    def parallel(self, skip: str, main: str) -> tuple[str, str] | None:
        """The two branches of a parallel residual: ``main`` adds two stages that both come from ``skip`` and neither from
        the other (GPT-NeoX's attention and FFN, both reading X), or None for a sequential path."""
        step = self.by_name.get(main)
        if step is None or step.op != "add" or len(step.inputs) != 2:
            return None
        a, b = step.inputs
        if all(x in self.by_name and self.is_ancestor(skip, x) for x in (a, b)) and not self.is_ancestor(a, b) and not self.is_ancestor(b, a):
            return a, b
        return None

    def branch_sections(self, s: Section, skip: str, branches: tuple[str, str], chunk: list[Step], main: Step, add: Step) -> None:
        """Fill a parallel path: the steps both branches read above, each branch in a box of its own, the sum below."""
        own: dict[str, list[Step]] = {branches[0]: [], branches[1]: []}
        shared: list[Step] = []
        for st in chunk:
            if st.name == main.name:
                continue
            into = [b for b in branches if st.name == b or self.is_ancestor(st.name, b)]
            (own[into[0]] if len(into) == 1 else shared).append(st)
        for st in shared:
            s.rows += self.rows(st, "source" if st.name == skip else "through")
        for b in branches:
            first = own[b][0] if own[b] else None
            title = msg("{branch} branch: {stage}", branch=msg("attention") if first is not None and any(
                OPS[x.op].attention for x in own[b] if x.op in OPS) else msg("FFN"), stage=b)
            s.branches.append(Section(title, [r for st in own[b] for r in self.rows(st, "")], kind="branch"))
        s.after = self.rows(main, "through") + self.rows(add, "add")
        s.note = msg("{x} goes three ways: into both branches, side by side, and unchanged into the add.", x=skip)

    def layer_sections(self, layer: Message | None, steps: list[Step]) -> list[Section]:
        sections: list[Section] = []
        start = 0
        for k, step in enumerate(steps):
            pair = self.residual(step)
            if pair is None:
                continue
            skip = pair[0]
            chunk = steps[start:k]
            start = k + 1
            n = len(sections)
            path = ORDINALS[n] if n < len(ORDINALS) else msg("residual path {n}", n=n + 1)
            added = f"{step.name} = {' + '.join(step.inputs)}"
            s = Section(msg("{layer}: {path}: {rest}", layer=layer, path=path, rest=added) if layer is not None
                        else msg("{path}: {rest}", path=path, rest=added))
            names = [st.name for st in chunk]
            if skip not in names:
                s.rows.append(Row("source", skip, "", self.shape(skip), msg("the residual stream, into this path"), kind="input"))
            two = self.parallel(skip, pair[1])
            if two is not None:
                self.branch_sections(s, skip, two, chunk, self.by_name[pair[1]], step)
                sections.append(s)
                continue
            rail = "" if skip in names else "through"
            for st in chunk:
                if st.name == skip:
                    s.rows += self.rows(st, "source")
                    rail = "through"
                else:
                    s.rows += self.rows(st, rail)
            s.rows += self.rows(step, "add")
            s.note = msg("{x} goes two ways: through the steps on the rail, and unchanged into the add.", x=skip)
            sections.append(s)
        rest = steps[start:]
        if rest:
            rows = [r for st in rest for r in self.rows(st, "")]
            if sections:
                sections[-1].rows += rows
            else:
                title = (msg("{layer}: no residual add: the steps in order", layer=layer) if layer is not None
                         else msg("no residual add: the steps in order"))
                sections.append(Section(title, rows, kind="stream"))
        return sections

    def exit_section(self, stack: str, steps: list[Step]) -> Section:
        many = self.layers(stack) > 1
        if stack:
            who = stack.rstrip(".")
            title = msg("{stack}: after the stack", stack=who) if many else msg("{stack}: after the block", stack=who)
        else:
            title = msg("after the stack") if many else msg("after the block")
        s = self.plain_section(title, "exit", steps)
        if stack == ENCODER:
            s.note = msg("{name} is the memory: every cross-attention of the decoder reads its keys and values from it.", name=steps[-1].name)
        return s

    def layers(self, stack: str) -> int:
        blk = self.spec.encoder if stack == ENCODER and self.spec.encoder else self.spec.block
        return blk.layers

    def sections(self) -> list[Section]:
        out: list[Section] = []
        groups = self.groups()
        for kind, stack, layer, steps in groups:
            if kind == "entry":
                out.append(self.entry_section(stack, steps))
            elif kind == "exit":
                out.append(self.exit_section(stack, steps))
            else:
                n = self.layers(stack)
                if layer is not None and n > MAX_LAYERS_DRAWN and 0 < layer < n - 1:
                    if layer == 1:
                        out.append(Section(msg("{a} to {b}: {n} more layers, the same steps as {c}, each with its own weights",
                                               a=f"{stack}blocks.1", b=f"{stack}blocks.{n - 2}", n=n - 2, c=f"{stack}blocks.0"), kind="skipped"))
                    continue
                out += self.layer_sections(self.layer_label(stack, layer), steps)
        return out

    @staticmethod
    def layer_label(stack: str, layer: int | None) -> Message | None:
        """'encoder layer blocks.0', 'layer blocks.1', 'decoder layer', or None (one plain layer)."""
        name = f"blocks.{layer}"
        if stack == ENCODER:
            return msg("encoder layer {name}", name=name) if layer is not None else msg("encoder layer")
        if stack:
            return msg("decoder layer {name}", name=name) if layer is not None else msg("decoder layer")
        return msg("layer {name}", name=name) if layer is not None else None


# -- drawing -----------------------------------------------------------------
STYLE = {"step": "", "internal": "dim", "unrecorded": "dim italic", "input": "cyan"}


def _kind(spec: Spec) -> Message:
    if spec.model == "encoder-decoder":
        return msg("encoder-decoder")
    order = {"pre": msg("pre-norm"), "post": msg("post-norm"), "parallel": msg("parallel residual"),
             "parallel_shared": msg("parallel residual, one norm"),
             "sandwich": msg("sandwich norms (each sublayer's output normalised before its residual add)")}.get(
        spec.block.norm_order, msg("the spec's own steps"))
    return nmsg("{order}, {n} layer", "{order}, {n} layers", spec.block.layers, order=order)


def legend() -> Text:
    t = Text()
    t.append("┬ … ⊕ ", style="bold cyan")
    t.append(tr("a residual path: the stage at ┬ goes through the steps on the rail, and unchanged into the add at ⊕\n"))
    t.append(tr("attn.* and cross.* "), style="dim")
    t.append(tr("rows are attention internals (tracer run --all prints their values); "))
    t.append(tr("(not recorded) "), style="dim italic")
    t.append(tr("is a shape inside a step; shapes are [axes] = [sizes]"))
    return t


def localise(sections: list[Section]) -> list[Section]:
    """Titles, notes and cells in the current language (built in English, translated here at the edge)."""
    for s in sections:
        s.title, s.note = render(s.title), render(s.note)
        for row in s.rows + s.after:
            row.computes, row.warning, row.weights, row.meaning = render(row.computes), render(row.warning), render(row.weights), render(row.meaning)
        localise(s.branches)
    return sections


def _rail(row: Row, height: int) -> Text:
    """The rail cell, `height` lines tall: a path's rail runs down every line of its row, wrapped ones too."""
    below = RAIL["through"] if row.rail in ("source", "through") else RAIL[""]
    return Text(RAIL[row.rail] + ("\n" + below) * (height - 1), style="bold cyan" if row.rail in ("source", "add") else "cyan")


def _cells(row: Row) -> list[Text]:
    style = STYLE[row.kind]
    computes = Text(row.computes, style=style)
    if row.kind in ("step", "input") and row.meaning:
        if row.computes:
            computes.append("\n")
        computes.append(row.meaning, style="dim")
    if row.warning:
        computes.append(f"\n⚠ {row.warning}", style="bold yellow")
    weights = Text(row.weights, style=style)
    height = max(len(computes.plain.split("\n")), len(weights.plain.split("\n")))
    return [
        _rail(row, height),
        Text(row.stage or tr("(not recorded)"), style=("bold " + style) if row.rail == "add" else style),
        Text(row.shape, style="bold" if row.kind in ("step", "input") else style),
        computes,
        weights,
    ]


def _widths(sections: list[Section]) -> list[int]:
    widths = [cell_len(tr(c)) for c in COLUMNS]
    for s in sections:
        for row in s.rows + s.after:
            for i, cell in enumerate(_cells(row)):
                widths[i] = max([widths[i]] + [cell_len(line) for line in cell.plain.split("\n")])
    return widths


class RailTable:
    """A section's rows as a table whose rail runs the full height of each row, however narrow the console.

    The rail column cannot see how tall its row wraps, so the table is laid out once to learn the
    column widths, every cell is wrapped at its width (as the table will wrap it), and the rail is
    drawn that many lines tall.
    """

    def __init__(self, rows: list[Row], widths: list[int] | None, header: bool = True) -> None:
        self.rows, self.widths, self.header = rows, widths, header

    def table(self, heights: list[int] | None = None) -> Table:
        table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False, header_style="dim", show_header=self.header)
        for i, name in enumerate(COLUMNS):
            table.add_column(tr(name), min_width=self.widths[i] if self.widths else None, overflow="fold", no_wrap=i <= 2)
        for k, row in enumerate(self.rows):
            cells = _cells(row)
            if heights is not None:
                cells[0] = _rail(row, heights[k])
            table.add_row(*cells)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        first = self.table()
        widths = [w - first._get_padding_width(i) for i, w in enumerate(first._calculate_column_widths(console, options))]
        heights = [max(len(cell.wrap(console, width, overflow="fold", no_wrap=i <= 2))
                       for i, (cell, width) in enumerate(zip(_cells(row), widths)) if i > 0)
                   for row in self.rows]
        yield self.table(heights)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table())


def section_panel(s: Section, widths: list[int] | None, panel_width: int | None) -> RenderableType:
    """One section as a panel; with `widths`, every panel's columns line up (when the console has room)."""
    if s.kind == "skipped":
        return Text(f"  ⋮ {s.title}", style="italic")
    body: RenderableType = RailTable(s.rows, widths)
    if s.branches:  # a parallel residual: its two branches in boxes side by side, between the rows they read and their sum
        side = Table.grid(padding=(0, 1), expand=False)
        for _ in s.branches:
            side.add_column()
        side.add_row(*(section_panel(b, None, None) for b in s.branches))
        body = Group(body, side, RailTable(s.after, widths, header=False))
    if s.note:
        body = Group(body, Text(s.note, style="italic"))
    return Panel(body, title=Text(s.title, style="bold"), title_align="left", width=panel_width, expand=False,
                 padding=(0, 1), border_style="cyan" if s.kind == "path" else "")


def _side_width(s: Section) -> int:
    """The width a parallel path's two branch boxes take side by side (0 for a path without branches)."""
    if not s.branches:
        return 0
    boxes = [sum(w) + 2 * (len(w) - 1) + 4 for w in (_widths([b]) for b in s.branches)]  # each box's table, borders, padding
    return sum(boxes) + len(boxes) - 1


def _out_stage(s: Section) -> Row | None:
    for row in reversed(s.rows + s.after):
        if row.kind in ("step", "input") and row.stage:
            return row
    return None


class Figure:
    """The whole drawing.  Its natural width lines every panel's columns up; a narrower console folds them."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.sections = localise(Graph(spec).sections())
        self.widths = _widths(self.sections)
        table_width = sum(self.widths) + 2 * (len(self.widths) - 1)  # one cell of padding each side, none at the edges
        self.width = max([table_width, *(_side_width(s) for s in self.sections)]
                         + [cell_len(s.title) + 4 for s in self.sections]) + 5  # borders and padding, and a cell rich 13 pads the rail with

    def header(self) -> Text:
        spec = self.spec
        head = Text()
        head.append(spec.name, style="bold")
        head.append("\n" + tr("{kind}; {dims}", kind=render(_kind(spec)), dims=", ".join(f"{k} = {v}" for k, v in spec.dims.as_dict().items()))
                    + "\n")
        head.append(_input_tokens(spec))
        head.append_text(legend())
        return head

    def parts(self, aligned: bool) -> list[RenderableType]:
        parts: list[RenderableType] = [self.header()]
        for i, s in enumerate(self.sections):
            parts.append(section_panel(s, self.widths if aligned else None, self.width if aligned else None))
            nxt = self.sections[i + 1] if i + 1 < len(self.sections) else None
            out = _out_stage(s)
            if nxt is not None and out is not None and nxt.kind not in ("entry", "skipped") and s.kind != "skipped":
                parts.append(Text(f"   ▼ {out.stage} {out.shape}", style="cyan"))
        return parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Group(*self.parts(aligned=self.width <= options.max_width))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max([self.width] + [cell_len(line) for line in self.header().plain.split("\n")])
        return Measurement(min(self.width, 40), widest)


def _input_tokens(spec: Spec) -> str:
    """A spec with a tokenizer: its input tokens as text beside their ids, one line; '' otherwise."""
    words = spec.tokens_text() if spec.tokenizer is not None else None
    if not words or not isinstance(spec.input.value, list):
        return ""
    shown = ", ".join(f"'{w}' ({i})" for w, i in zip(words[0], spec.input.value[0]))
    return render(msg("input tokens, sample b=0: {tokens}", tokens=shown)) + "\n"


def graph_view(spec: Spec) -> Figure:
    return Figure(spec)
