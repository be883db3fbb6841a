"""`tracer probe`: check properties empirically, by running the block on changed inputs.

- causality: under a causal mask, no stage at positions <= t may change when the
  inputs after t change.  A LayerNorm over T leaks although the mask is right
  (section 17.3): this finds the first stage where it shows.
- permutation equivariance (Example 17.1): with no positions and no mask,
  permuting the rows of X permutes the rows of every per-position stage.
"""

from __future__ import annotations

import numpy as np

from tracer.engine import executor
from tracer.engine.params import uniform
from tracer.errors import UsageError
from tracer.messages import at, msg
from tracer.probe.result import FAIL, NOT_APPLICABLE, PASS, UNMEASURED, Property
from tracer.spec import Spec

MAX_PROBED_POSITIONS = 6
def _tolerance(a: np.ndarray) -> float:
    scale = float(np.nanmax(np.abs(a))) if a.size and np.isfinite(a).any() else 1.0
    return 1e-9 * (1.0 + scale)


def _compare(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Largest |a - b| over the cells both runs can show (NaN against a number counts as infinity), and how many
    cells are NaN in both: those cannot show a change, so they are counted, never passed."""
    both_nan = np.isnan(a) & np.isnan(b)
    d = np.where(a == b, 0.0, np.abs(a - b))  # equal infinities are unchanged
    d = np.where(np.isnan(d) & ~both_nan, np.inf, d)
    seen = d[~both_nan]
    return (float(seen.max()) if seen.size else 0.0), int(both_nan.sum())


def _unmeasured(name: str, blind: dict[str, int], total: dict[str, int]) -> Property:
    stage = next(iter(blind))
    return Property(name, UNMEASURED,
                    msg("stage {stage} is NaN in both runs at {blind} of its {total} compared values (stages with such values: {n}): NaN cannot show a change, "
                        "so the probe cannot tell whether the property holds; probe a spec whose run has no NaN", stage=stage, blind=blind[stage],
                        total=total[stage], n=len(blind)), stage)


def _upto(stage: executor.Stage, t: int) -> np.ndarray:
    """The stage restricted to positions 0..t along every T axis (queries and keys)."""
    index = tuple(slice(0, t + 1) if a == "T" else slice(None) for a in stage.axes)
    return stage.array[index]


def _span(a: int, b: int) -> str:
    return msg("position {a}", a=a) if a == b else msg("positions {a}..{b}", a=a, b=b)


def _probe_positions(T: int) -> list[int]:
    if T - 1 <= MAX_PROBED_POSITIONS:
        return list(range(T - 1))
    picks = {0, 1, (T - 1) // 4, (T - 1) // 2, T - 2}
    return sorted(picks)[:MAX_PROBED_POSITIONS]


def causality(spec: Spec) -> Property:
    from tracer.probe.exact import causal_by_design

    name = "causality"
    xname = causal_by_design(spec)
    if isinstance(xname, Property):
        return xname
    base = executor.run(spec, keep_going=True)
    x = base.stages[xname].array
    T = x.shape[1]  # fewer than dims.T when the run is cut at T_max
    if T < 2:
        return Property(name, NOT_APPLICABLE, msg("T = 1: there is no later position to perturb"))
    noise = uniform(0, "probe.causality", x.shape, -1.0, 1.0).astype(x.dtype)
    checked, largest = [], 0.0
    blind: dict[str, int] = {}
    total: dict[str, int] = {}
    for t in _probe_positions(T):
        x2 = x.copy()
        x2[:, t + 1:, :] += noise[:, t + 1:, :]
        changed = executor.run(spec, keep_going=True, overrides={xname: x2})
        after_x = list(base.stages)[list(base.stages).index(xname) + 1:]
        for stage in (base.stages[n] for n in after_x):
            if stage.name not in changed.stages or "T" not in stage.axes:
                continue
            if stage.array.shape[stage.axes.index("T")] != T:  # a slice along T: its rows are not positions 0..
                continue
            a, b = _upto(stage, t), _upto(changed.stages[stage.name], t)
            if a.shape != b.shape:
                continue
            diff, nan = _compare(a, b)
            if nan:
                blind[stage.name] = blind.get(stage.name, 0) + nan
                total[stage.name] = total.get(stage.name, 0) + a.size
            if diff > _tolerance(a):
                return Property(name, FAIL,
                                msg("perturbing {later} changed stage {stage} at {earlier} by up to {d}: {who} on later ones, although the mask is causal",
                                    later=_span(t + 1, T - 1), stage=stage.name, earlier=_span(0, t), d=f"{diff:.3g}",
                                    who=msg("position 0 depends") if t == 0 else msg("positions up to {t} depend", t=t)),
                                stage.name, t)
            largest = max(largest, diff)
        checked.append(t)
    if blind:
        return _unmeasured(name, blind, total)
    return Property(name, PASS,
                    msg("perturbing the positions after t changed no stage at positions 0..t (checked t = {names}; largest change {largest})",
                        names=', '.join(map(str, checked)), largest=f"{largest:.3g}"))


def without_positions_or_mask(spec: Spec) -> Spec:
    """Example 17.1's setting: no position information and every key visible."""
    steps = []
    for step in spec.steps:
        if step.op in ("position_table", "sinusoidal"):
            continue
        if step.op == "add_position":
            step = step._replace(op="identity", inputs=step.inputs[:1])
        elif step.op in ("mha", "cross_mha"):
            step = step._replace(mask="none", base=None, window=None)
        steps.append(step)
    blk = spec.block._replace(positions="none", mask="none", mask_matrix=None, window=None)
    return spec._replace(block=blk, steps=tuple(steps))


def permutation(spec: Spec) -> Property:
    name = "permutation equivariance"
    T = spec.dims.T
    if T < 2:
        return Property(name, NOT_APPLICABLE, msg("T = 1: there is nothing to permute"))
    if spec.model == "encoder-decoder":
        return Property(name, NOT_APPLICABLE, msg("an encoder-decoder has two inputs; Example 17.1's property is about one block's rows"))
    bare = without_positions_or_mask(spec)
    base = executor.run(bare, keep_going=True)
    perm = np.roll(np.arange(T), 1)  # the last row moves to the front, the others follow (Example 17.1)
    x = base.stages["x"].array
    moved = executor.run(bare, keep_going=True, overrides={"x": x[:, perm]})
    largest = 0.0
    blind: dict[str, int] = {}
    total: dict[str, int] = {}
    after_x = list(base.stages)[list(base.stages).index("x") + 1:]
    for stage in (base.stages[n] for n in after_x):
        if stage.name not in moved.stages or stage.axes.count("T") != 1:
            continue
        axis = stage.axes.index("T")
        if stage.array.shape[axis] != T:  # a slice of the positions (select along T) has no rows to permute
            continue
        a = np.take(stage.array, perm, axis=axis)
        b = moved.stages[stage.name].array
        if a.shape != b.shape:
            continue
        diff, nan = _compare(a, b)
        if nan:
            blind[stage.name], total[stage.name] = nan, a.size
        if diff > _tolerance(a):
            return Property(name, FAIL,
                            msg("with positions and mask removed, moving row {x} of X to the front did not move stage {name} the same way "
                                "(largest difference {diff})", x=T - 1, name=stage.name, diff=f"{diff:.3g}"), stage.name)
        largest = max(largest, diff)
    if blind:
        return _unmeasured(name, blind, total)
    checked_plain = False
    if spec.block.positions != "none" or spec.block.mask != "none":
        checked_plain = True
    if checked_plain:
        return Property(name, PASS, msg("moving row {r} of X to the front moved every per-position stage's rows the same way (largest difference {d}). "
                                        "Checked with positions and mask removed, as Example 17.1 states it; the spec's own positions and mask are what "
                                        "break it on purpose.", r=T - 1, d=f"{largest:.3g}"))
    return Property(name, PASS, msg("moving row {r} of X to the front moved every per-position stage's rows the same way (largest difference {d}).", r=T - 1,
                                    d=f"{largest:.3g}"))


def unmeasured_error(spec: Spec, props: list[Property]) -> None:
    """A probe that could not measure is not a pass: UsageError (exit 2) naming the properties, after the table."""
    blind = [p for p in props if p.result == UNMEASURED]
    if blind:
        raise UsageError(msg("{path}: the probe cannot measure {names}: {evidence}", path=spec.path, names=' and '.join(p.name for p in blind),
                             evidence=blind[0].evidence))


def probe(spec: Spec, exact: bool = False, max_memory: str | None = None) -> list[Property]:
    """Both properties; with ``exact`` causality is proved with the backward pass (tracer/grad/exact.py).
    With ``max_memory``, refused first (exit 2) if two full runs at once would need more
    (each property holds the unchanged run while it runs the changed one)."""
    import warnings

    if max_memory is not None:
        from tracer.spec import memory

        run = memory.run_bytes(spec)
        memory.refuse_over(at(spec.path, msg("this probe")), {msg("the unchanged run"): run, msg("the changed run"): run},
                           memory.parse_size(max_memory), max_memory)

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN and Inf are judged above ("cannot measure"), not warned about
        if exact:
            from tracer.probe.exact import causality as proved_causality

            return [proved_causality(spec), permutation(spec)]
        return [causality(spec), permutation(spec)]
