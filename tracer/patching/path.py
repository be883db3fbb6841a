"""`tracer patch CLEAN CORRUPT --sender HEAD --receiver q|k|v`: path patching (Wang et al. 2022, the IOI paper's).

For each sender head (``blocks.L.attn.head.H``; a pattern matches several) and each receiver part (q, k or v):

1. The sender's path, everything else frozen: the corrupt run with the sender's output (its [B,T,d] slice of the
   heads before W_O) taken from the clean run at every position, and the stage of every later attention and MLP step
   (ops mha, cross_mha, ffn, ffn_out, expert_mix; the sender's own layer's MLP included) held at its corrupt value.
   The norms and residual additions are computed again, so the residual stream carries the corrupt run's plus the
   sender's change through W_O, and nothing else.  The input each later self-attention step reads (its norm's output,
   in a Pre-Norm block) is recorded: the receivers' input.
2. The receivers: the corrupt run with the q (k, v) projection of every later self-attention step (every head of
   each) reading the input recorded in 1, and everything else computed as it comes (the receivers' changed outputs
   reach the later layers, the other two projections read the residual stream of this run).

A cell is the metric of run 2 minus the corrupt run's (--normalise: as a share of clean minus corrupt): what the
sender changes through the receivers' queries (keys, values) alone.  The receivers are every head of every later
layer; a sender in the last layer has none and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tracer.engine import executor
from tracer.engine.interventions import HeadEdit, Intervention, head_targets, head_value
from tracer.errors import UsageError
from tracer.messages import Message, msg
from tracer.patching.run import Ask, PatchGrid, _violations, need_logits, segments_match, start
from tracer.spec import Spec, memory

RECEIVERS = ("q", "k", "v")
FROZEN = ("mha", "cross_mha", "ffn", "ffn_out", "expert_mix")  # what step 1 holds at its corrupt value after the sender


def pick_senders(spec: Spec, patterns: Sequence[str]) -> list[tuple[str, str, int]]:
    """(name, attention step, head) of each head output the patterns name (segment by segment), in step and head order."""
    heads = [(n, st, h) for n, (st, h, part) in head_targets(spec).items() if part == "output"]
    order = {s.name: i for i, s in enumerate(spec.steps)}
    picked = [x for x in heads if any(segments_match(x[0], p) for p in patterns)]
    for p in patterns:
        if not any(segments_match(n, p) for n, _, _ in heads):
            from tracer.model.catalogue import suggest

            raise UsageError(msg("--sender {pattern}: no head of {where} matches it{hint} (a head's output such as blocks.0.attn.head.1, or a pattern "
                                 "such as 'blocks.*.attn.head.*')",
                                 pattern=p, where=spec.path, hint=suggest(p, [n for n, _, _ in heads])))
    return sorted(picked, key=lambda x: (order[x[1]], x[2]))


def path_patch(clean: Spec, corrupt: Spec, senders: Sequence[str], receivers: Sequence[str], ask: Ask,
               max_memory: str = memory.DEFAULT_MAX_MEMORY) -> PatchGrid:
    """The path-patching grid: senders x receivers (see the module's docstring)."""
    need_logits(clean, corrupt)
    for part in receivers:
        if part not in RECEIVERS:
            raise UsageError(msg("--receiver {got}: expected q, k or v (the input of the receivers' queries, keys or values)", got=part))
    parts = list(dict.fromkeys(receivers or RECEIVERS))
    rows = pick_senders(corrupt, senders)
    index = {s.name: i for i, s in enumerate(corrupt.steps)}
    later = {name: [s for s in corrupt.steps[index[step] + 1:] if s.op == "mha"] for name, step, _ in rows}
    named = {p for p in senders if not any(c in p for c in "*?[")}
    for name, _, _ in rows:
        if not later[name] and (name in named or all(not later[n] for n, _, _ in rows)):  # a pattern's heads of the last layer are left out
            raise UsageError(msg("--sender {name}: no self-attention comes after it, so it has no receivers; path patching needs a sender before the last "
                                 "layer", name=name))
    rows = [x for x in rows if later[x[0]]]
    r = start(clean, corrupt, [], ask, max_memory)
    values = np.full((len(rows), len(parts), len(r.samples)), np.nan)
    violations: list[Message] = []
    live = {n: st.array for n, st in r.base.stages.items() if st.data is not None}
    H = corrupt.dims.H
    with np.errstate(all="ignore"):
        for i, (name, step, h) in enumerate(rows):
            prefix = name.rpartition(".head.")[0]
            sender = Intervention(step, "head", f"--sender {name}",
                                  edits=(HeadEdit("output", h, np.array(head_value(r.clean.stages[f"{prefix}.heads"].array, "output", h, H)), "clean"),))
            frozen = tuple(Intervention(s.name, "set", f"--sender {name}: {s.name} frozen", live[s.name], "corrupt")
                           for s in corrupt.steps[index[step] + 1:] if s.op in FROZEN)
            inputs = frozenset(s.inputs[0] for s in later[name])
            path = executor.Executor(corrupt._replace(interventions=(sender, *frozen)), policy=memory.RecordPolicy("table", inputs), params=r.params,
                                     inputs=r.inputs).run(index[step], live)
            if not path.ok:
                violations += _violations(f"{name} (frozen)", path)
                continue
            first = index[later[name][0].name]
            for j, part in enumerate(parts):
                patched = tuple(Intervention(s.name, "head", f"--receiver {part}", edits=(HeadEdit(f"{part}_in", None, path.stages[s.inputs[0]].array,
                                                                                                   f"{name} frozen"),))
                                for s in later[name])
                run = executor.Executor(corrupt._replace(interventions=patched), policy=memory.RecordPolicy("table", frozenset({"logits"})),
                                        params=r.params, inputs=r.inputs).run(first, live)
                got = r.measure(run)
                if got is None:
                    violations += _violations(f"{name} -> {part}", run)
                    continue
                values[i, j] = got
    T = corrupt.stage_shapes["logits"][1][1]
    return PatchGrid(clean, corrupt, [n for n, _, _ in rows], parts, r.metric, r.samples, T - 1, r.clean_values, r.corrupt_values, values, violations,
                     title="path")
