"""Every activation tracer knows, one record each: everything the code knows about an FFN's activation, declared once.

An activation is what an FFN's first half applies to z = x W_1 + b_1; a gated one (SwiGLU, GeGLU) applies its gate's
to z and multiplies by x W_3 + b_3.  A record holds:

- ``name``: as a spec writes it (``block.activation``, a step's ``activation``); ``spec``: whether a spec may name it
  (SiLU is only SwiGLU's gate);
- ``label``: its name in tables and stage meanings (``FFN after GELU (tanh)``) and in tracer graph's box; ``expr``: in
  tracer diff's expressions (``GELU_tanh(norm2 W1 + b1)``; a gated FFN's expression names its gate's);
- ``meaning``: the function in a few words, in English and Chinese (messages.given): what a diagnosis says a student
  used in its place;
- ``formula``: what the FFN's first half computes with it (``tracer stages``; ``{0}``: the stage it reads), its Chinese
  in tracer/zh.py, as an op's formula's;
- ``forward``, ``backward``, ``reference``: where its engine code is, as ``module:function``: the kernel
  ``f(z, inplace=False) -> a`` (``inplace``: z is the caller's own, and may be written over), its gradient
  ``f(dy, z) -> dz`` and the scalar reference ``f(list of floats) -> list of floats`` (a record registered at run time
  may give the functions themselves).  A gated record's are its gate's;
- ``temporaries``: the bytes its kernel holds at its peak beyond the hidden layer (the memory estimate,
  tracer/spec/memory.py through the FFN ops' records), from the hidden layer's bytes and the dtype's itemsize;
- ``neighbours``: the activations a student plausibly writes instead (tracer diff's diagnosis search tries each,
  compare/search.py; ``sigmoid`` and ``none``, no activation of tracer's, are NOT_ACTIVATIONS), and ``diagnoses``:
  which of them a worded diagnosis of compare/hints.py names;
- ``gate``: a gated FFN's gate, the name of another record (None: not gated);
- ``design``: tracer diff's words for it as the block's design choice (None: the chapter's ReLU needs none), said
  at ``block.activation``'s place among the settings, or, ``design_from="steps"``, from the steps with the family's
  other choices (Gemma's GeGLU);
- ``hf_names``: Hugging Face's names for it (ACT2FN: config.json's hidden_act, activation_function), which the
  checkpoint families read (HF_ACTIVATIONS);
- ``reads_output``: its gradient may be read from its output instead of z (ReLU: h > 0 exactly where z > 0), so z
  is not computed again; its backward then also takes ``out=``, an array to write into (it may be the output itself).

Adding an activation: its record here, its kernels (forward and backward, tracer/engine/kernels/ffn.py) and its scalar reference
(tracer/engine/reference.py), and its formula's Chinese in tracer/zh.py; tests/model/test_activations.py says what
is missing.  Nothing here imports NumPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from tracer.messages import Message, given, msg
from tracer.model.named import resolve
from tracer.model.shapes import PY_VALUE_BYTES

Temporaries = Callable[[int, int], int]  # (the hidden layer's bytes, the itemsize) -> bytes held beyond it
Code = str | Callable[..., Any]  # module:function, or (a record registered at run time, as a test's) the function itself

DEFAULT_ACTIVATION = "relu"  # the chapter's, and a spec's when it names none
NOT_ACTIVATIONS = ("sigmoid", "none")  # what a diagnosis may also try in an activation's place: the sigmoid, or none at all


class Activation(NamedTuple):  # a NamedTuple, as an op's record: cheap to make at every start
    name: str
    label: str
    expr: str
    meaning: Message  # its English and, beside it, its Chinese (messages.given)
    formula: str
    forward: Code
    backward: Code
    reference: Code
    temporaries: Temporaries
    neighbours: tuple[str, ...]
    diagnoses: tuple[tuple[str, str], ...] = ()  # (neighbour, the worded diagnosis of compare/hints.py that names it)
    gate: str | None = None
    design: Message | None = None
    design_from: str = "settings"  # settings | steps
    hf_names: tuple[str, ...] = ()
    spec: bool = True
    reads_output: bool = False

    def run_forward(self) -> Callable[..., Any]:
        return resolve(self.forward)

    def run_backward(self) -> Callable[..., Any]:
        return resolve(self.backward)

    def run_reference(self) -> Callable[..., Any]:
        return resolve(self.reference)


# -- working memory -------------------------------------------------------------------------------------------

def _in_place(hidden: int, itemsize: int) -> int:
    return 0  # computed in the hidden layer itself


def _one_array(hidden: int, itemsize: int) -> int:
    return hidden  # one scratch array the size of the hidden layer


def _three_arrays(hidden: int, itemsize: int) -> int:
    return 3 * hidden  # the tanh GELU's scratch and its steps; SwiGLU: the gate, the up projection and the product


def _four_arrays(hidden: int, itemsize: int) -> int:
    return 4 * hidden  # GeGLU: the tanh GELU's 3 and the gate


def _python_floats(hidden: int, itemsize: int) -> int:
    return hidden // itemsize * (PY_VALUE_BYTES + 8) + 2 * hidden  # math.erf through frompyfunc: an object array of Python floats


# -- the records -------------------------------------------------------------------------------------------------
_KERNELS, _REFERENCE = "tracer.engine.kernels.ffn:", "tracer.engine.reference:"


def _plain(name: str, label: str, expr: str, meaning: str, zh: str, formula: str, *, temporaries: Temporaries,
           neighbours: tuple[str, ...], **parts: Any) -> Activation:
    """A record whose kernels are NAME and NAME_backward and whose scalar reference is NAME."""
    return Activation(name, label, expr, given(meaning, zh), formula, _KERNELS + name, _KERNELS + name + "_backward",
                      _REFERENCE + name, temporaries, neighbours, **parts)


def _gated(name: str, label: str, expr: str, meaning: str, zh: str, formula: str, gate: Activation, *,
           temporaries: Temporaries, neighbours: tuple[str, ...], **parts: Any) -> Activation:
    """A gated FFN's record: its gate's kernels and reference, applied to z and multiplied by x W_3 + b_3."""
    return Activation(name, label, expr, given(meaning, zh), formula, gate.forward, gate.backward, gate.reference,
                      temporaries, neighbours, gate=gate.name, **parts)


_SILU = _plain("silu", "SiLU", "SiLU", "SiLU", "SiLU", "silu({0} W_1 + b_1), silu(z) = z sigmoid(z) = z / (1 + exp(-z))",
               temporaries=_one_array, neighbours=("relu", "gelu", "gelu_tanh", "relu2", "sigmoid", "none"), spec=False)
_GELU_TANH = _plain(
    "gelu_tanh", "GELU (tanh)", "GELU_tanh", "GELU's tanh approximation", "GELU 的 tanh 近似",
    "GELU({0} W_1 + b_1), GPT-2's tanh approximation z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))",
    temporaries=_three_arrays, neighbours=("relu", "gelu", "silu", "relu2", "sigmoid", "none"), diagnoses=(("gelu", "gelu_exact"),),
    design=msg("GELU (tanh)"), hf_names=("gelu_new", "gelu_pytorch_tanh"))

_ACTIVATION_RECORDS: tuple[Activation, ...] = (
    _plain("relu", "ReLU", "ReLU", "ReLU", "ReLU", "ReLU({0} W_1 + b_1) = max({0} W_1 + b_1, 0)", temporaries=_in_place,
           neighbours=("gelu", "gelu_tanh", "silu", "relu2", "sigmoid", "none"), hf_names=("relu",), reads_output=True),
    _plain("gelu", "GELU", "GELU", "the exact GELU (erf)", "精确的 GELU（erf）",
           "GELU({0} W_1 + b_1), GELU(z) = z Phi(z) = z/2 (1 + erf(z / sqrt 2))", temporaries=_python_floats,
           neighbours=("relu", "gelu_tanh", "silu", "relu2", "sigmoid", "none"), diagnoses=(("gelu_tanh", "gelu_tanh"),),
           design=msg("exact GELU"), hf_names=("gelu",)),
    _GELU_TANH,
    _gated("swiglu", "SwiGLU", "SwiGLU", "SwiGLU", "SwiGLU", "silu({0} W_1 + b_1) * ({0} W_3 + b_3), silu(z) = z sigmoid(z)", _SILU,
           temporaries=_three_arrays, neighbours=("gelu", "gelu_tanh", "relu", "sigmoid"), design=msg("SwiGLU")),
    _gated("geglu", "GeGLU", "GeGLU", "GeGLU", "GeGLU",
           "GELU_tanh({0} W_1 + b_1) * ({0} W_3 + b_3), the tanh approximation z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))", _GELU_TANH,
           temporaries=_four_arrays, neighbours=("silu", "gelu", "relu", "sigmoid"), diagnoses=(("gelu", "geglu_exact"), ("silu", "geglu_silu")),
           design=msg("GeGLU (a gated FFN through the tanh GELU)"), design_from="steps"),
    _SILU,
    # Primer's squared ReLU (So et al. 2021), relu(z)^2: Hugging Face's relu2
    _plain("relu2", "ReLU²", "ReLU²", "ReLU²", "ReLU²", "ReLU²({0} W_1 + b_1) = max({0} W_1 + b_1, 0)^2, the squared ReLU",
           temporaries=_in_place, neighbours=("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "none"),
           design=msg("squared ReLU (ReLU²)"), hf_names=("relu2",)),
    # tanh: what BERT's pooler and RoBERTa's classification head apply after their dense layer
    _plain("tanh", "tanh", "tanh", "tanh", "tanh", "tanh({0} W_1 + b_1)", temporaries=_in_place,
           neighbours=("relu", "gelu", "gelu_tanh", "silu", "relu2", "sigmoid", "none"), design=msg("tanh")),
)

ACTIVATIONS: dict[str, Activation] = {a.name: a for a in _ACTIVATION_RECORDS}
# Hugging Face's names (ACT2FN) of the plain activations a spec may name -> tracer's: gelu is the exact erf GELU,
# gelu_new and gelu_pytorch_tanh the tanh one (the checkpoint families read config.json's hidden_act with it)
HF_ACTIVATIONS: dict[str, str] = {hf: a.name for a in _ACTIVATION_RECORDS if a.spec and a.gate is None for hf in a.hf_names}


def activation_of(name: str | None) -> Activation:
    """The record of the activation ``name`` (None: the default, ReLU); KeyError for a name no record has."""
    return ACTIVATIONS[name or DEFAULT_ACTIVATION]


def spec_activations() -> tuple[str, ...]:
    """The activations a spec may name, in the records' order."""
    return tuple(name for name, a in ACTIVATIONS.items() if a.spec)


def is_gated(name: str | None) -> bool:
    """Whether the FFN of activation ``name`` is gated (reads w3 and b3 as well); False for a name no record has."""
    record = ACTIVATIONS.get(name or DEFAULT_ACTIVATION)
    return record is not None and record.gate is not None
