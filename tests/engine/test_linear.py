"""validate, run and diff grow linearly with the number of layers.

Timed tests are forbidden (the machine is shared), so these count Python bytecode instructions
executed (sys.settrace with opcode events): deterministic, and a loop over all steps inside a loop
over all steps shows as a ratio near 4 when the layers double, where linear work gives 2.  Before
the fix the ratios were 3.5 (validate) and 2.8 (diff) at these sizes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import compared, write_spec

from tracer.spec import load_spec_text, memory

LINEAR = 2.3  # doubling the layers may cost at most this much more


def opcodes(fn: Callable[[], object]) -> int:
    count = 0

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def decoder(n: int) -> str:
    return f"dims: {{C: 2, H: 2, F: 3}}\ninput: {{tokens: [0, 1, 2]}}\nseed: 0\nblock: {{layers: {n}}}\n"


def encoder_decoder(n: int) -> str:
    return ("model: encoder-decoder\ndims: {C: 2, H: 2, F: 3}\ninput: {source: [0, 1], target: [1, 0]}\nseed: 0\n"
            f"encoder: {{layers: {n}}}\ndecoder: {{layers: {n}}}\n")


def validate(text: str) -> None:
    spec = load_spec_text(text)
    memory.check_run(spec, memory.policy_for(spec, "all", None, 0, 0), "4GB")


@pytest.mark.parametrize("make, n", [(decoder, 40), (encoder_decoder, 20)])
def test_validate_is_linear_in_layers(make: Callable[[int], str], n: int) -> None:
    small, large = opcodes(lambda: validate(make(n))), opcodes(lambda: validate(make(2 * n)))
    assert large < LINEAR * small, (small, large, large / small)


@pytest.mark.slow  # two encoder-decoder diffs of 10 and 20 layers, every bytecode instruction counted
def test_diff_is_linear_in_layers(tmp_path: Path) -> None:
    counts = []
    for n in (10, 20):
        spec = str(write_spec(tmp_path, encoder_decoder(n), f"ed{n}.yaml"))
        counts.append(opcodes(lambda spec=spec: compared(spec, spec)))  # both sides run: the executor is counted too
    assert counts[1] < LINEAR * counts[0], (counts, counts[1] / counts[0])
