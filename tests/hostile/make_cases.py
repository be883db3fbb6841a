"""The hostile inputs, made at test time: one file (or folder) per case, nothing big checked in.

    python tests/hostile/make_cases.py FOLDER      # writes every case into FOLDER, to try them by hand

Each checkpoint case is a hostile file that the chapter's pre-norm spec names as its ``attn.w_q`` (``CASE.yaml``
beside it), with a fragment the refusal names; ``ARRAYS`` are hostile diff sides, ``FOLDERS`` hostile model folders
for ``tracer import``.  Every maker writes small files: a 20 MB header is a 20 KB compressed zip member.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

PRE = (Path(__file__).resolve().parents[2] / "specs" / "ch17-prenorm.yaml").read_text(encoding="utf-8")
SECRET = b"hunter2!"  # 8 bytes a hostile "header length" would disclose


def npy(header: bytes, data: bytes = b"", major: int = 1) -> bytes:
    """An .npy file with this header text, written as-is (no padding, no check)."""
    size = struct.pack("<H", len(header)) if major == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + size + header + data


def npy_header(shape: str = "(2, 2)", descr: str = "'<f8'") -> bytes:
    return ("{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }").encode("latin1") + b"\n"


def safetensors(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def zip_of(members: dict[str, bytes], compress: int = zipfile.ZIP_DEFLATED) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with zipfile.ZipFile(path, "w", compress) as z:
            for name, data in members.items():
                z.writestr(name, data)
    return write


def encrypted(path: Path) -> None:
    """A valid .npz whose member is marked encrypted (bit 0 of the flags, in its local header and the directory)."""
    zip_of({"w.npy": npy(npy_header(), bytes(32))}, zipfile.ZIP_STORED)(path)
    data = bytearray(path.read_bytes())
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.index(signature)
        data[i + flags_at] |= 1
    path.write_bytes(bytes(data))


def wide_directory(path: Path, members: int = 200_000) -> None:
    """A zip of ``members`` empty files (10 MB of directory, some 100 MB once zipfile has read it), written by hand:
    zipfile itself takes many seconds to write so many."""
    local, central = [], []
    offset = 0
    for i in range(members):
        name = b"m%07d" % i
        head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0, 0, 0, 0, 0,
                                   offset) + name)
        local.append(head)
        offset += len(head)
    directory = b"".join(central)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, members % 65536, members % 65536, len(directory), offset, 0)
    path.write_bytes(b"".join(local) + directory + end)


def huge_member(path: Path, values: int = 25_000_000) -> None:
    """An .npz of about 200 KB whose one member, all zeros, unpacks to 200 MB (its header declares it honestly)."""
    header = npy_header(f"({values},)")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("norm1.npy", "w", force_zip64=True) as fh:
        fh.write(npy(header))
        chunk = bytes(1 << 22)
        left = values * 8
        while left:
            fh.write(chunk[:min(left, len(chunk))])
            left -= min(left, len(chunk))


def _writer(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def _torch(kind: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import torch

        t = torch.eye(2, dtype=torch.float64)
        torch.save({"w": t.to_sparse() if kind == "sparse" else torch.empty(2, 2, device="meta")}, path)
    return write


class Case(NamedTuple):
    name: str
    file: str  # the file the spec names (relative to the spec)
    make: Callable[[Path], None]  # writes it
    fragment: str  # what the refusal names
    key: str | None = None  # the spec's key: for the file
    torch: bool = False  # needs torch installed


DEEP = b"[" * 100_000 + b"]" * 100_000
OVERLAP = json.dumps({"w": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]},
                      "v": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]}}).encode()
INFINITE = b'{"w": {"dtype": "F64", "shape": [Infinity], "data_offsets": [0, 32]}}'

CHECKPOINTS = [
    Case("npz-huge-member-header", "w.npz", zip_of({"w.npy": npy(npy_header() + b" " * 20_000_000, major=2)}), "more than the 10,000 NumPy reads"),
    Case("npy-long-header", "w.npy", _writer(npy(npy_header() + b" " * 20_000, bytes(32), major=2)), "more than the 10,000 NumPy reads"),
    Case("npy-minus-signs", "w.npy", _writer(npy(npy_header("(" + "-" * 5000 + "2, 2)"), bytes(32))), "malformed .npy header"),
    Case("npy-empty-dtype", "w.npy", _writer(npy(npy_header(descr="''"), bytes(32))), "a type tracer does not know"),
    Case("npy-structured", "w.npy", _writer(npy(npy_header(descr="[('a', '<f8')]"), bytes(32))), "structured array"),
    Case("npy-pickle", "w.npy", _writer(npy(npy_header(descr="'|O'"), b"\x80\x04N.")), "Python objects (a pickle)"),
    Case("npy-huge-shape", "w.npy", _writer(npy(npy_header("(10000000000000000000, 2)"), bytes(32))), "is truncated"),
    Case("npz-wide-directory", "w.npz", lambda p: wide_directory(p), "a zip directory of"),
    Case("npz-encrypted", "w.npz", encrypted, "is encrypted"),
    Case("npz-fifo", "w.npz", _fifo, "is not a regular file"),
    Case("safetensors-fifo", "w.safetensors", _fifo, "is not a regular file"),
    Case("npz-dev-zero", "w.npz", _link("/dev/zero"), "is not a regular file"),
    Case("safetensors-deep", "w.safetensors", _writer(safetensors(DEEP)), "nests deeper than"),
    Case("safetensors-infinity", "w.safetensors", _writer(safetensors(INFINITE, bytes(32))), "not valid JSON"),
    Case("safetensors-wide-header", "w.safetensors", _writer(safetensors(b'{"w": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]}}'
                                                                      + b" " * 6_000_000, bytes(32))), "more than --max-memory allows"),
    Case("safetensors-overlap", "w.safetensors", _writer(safetensors(OVERLAP, bytes(32))), "overlap", key="w"),
    Case("safetensors-secret-length", "w.safetensors", _writer(SECRET + b"more of the secret file"), "is not a safetensors file"),
    Case("nul-in-path", "w\0.npy", _writer(b""), "NUL byte"),
    Case("pt-sparse", "w.pt", _torch("sparse"), "sparse tensor", key="w", torch=True),
    Case("pt-meta", "w.pt", _torch("meta"), "meta device", key="w", torch=True),
]


def spec_text(case: Case) -> str:
    ref = {"file": case.file} if case.key is None else {"file": case.file, "key": case.key}
    return PRE.replace("w_q: identity", "w_q: " + json.dumps(ref))  # JSON is YAML: "\u0000" stays a NUL byte


def make_checkpoint(case: Case, folder: Path) -> Path:
    """``folder/CASE/`` with the hostile file and the spec that names it; the spec's path."""
    home = folder / case.name
    home.mkdir(parents=True)
    if "\0" not in case.file:
        case.make(home / case.file)
    spec = home / f"{case.name}.yaml"
    spec.write_text(spec_text(case), encoding="utf-8")
    return spec


class Side(NamedTuple):
    name: str
    make: Callable[[Path], None]
    fragment: str


ARRAYS = [
    Side("huge.npz", huge_member, "over --max-memory"),
    Side("header.npz", zip_of({"norm1.npy": npy(npy_header() + b" " * 20_000_000, major=2)}), "more than the 10,000 NumPy reads"),
    Side("encrypted.npz", encrypted, "is encrypted"),
    Side("fifo.npz", _fifo, "is not a regular file"),
    Side("zero.npz", _link("/dev/zero"), "is not a regular file"),
    Side("digits.json", _writer(b'{"norm1": [[' + b"9" * 5000 + b', 1]]}'), "too large for a double"),
]


def model_folder(folder: Path, fifo: str | None = None) -> Path:
    """A tiny GPT-2 folder as Hugging Face writes it; ``fifo``: that file of it replaced by a FIFO."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "checkpoints"))
    try:
        import tiny_gpt2
    finally:
        sys.path.pop(0)
    tiny_gpt2.make(str(folder), layers=1, C=8, H=2, V=16, T_max=8)
    if fifo is not None:
        (folder / fifo).unlink()
        os.mkfifo(folder / fifo)
    return folder


def extra_names(folder: Path, layers: int = 24, extra: int = 100_000) -> Path:
    """A GPT-2 safetensors file of ``layers`` tiny layers plus ``extra`` names no layout maps: validating or importing it
    costs the names plus the weights, never their product."""
    import numpy as np
    from safetensors.numpy import save_file

    C = 4
    tensors: dict[str, np.ndarray] = {"wte.weight": np.zeros((8, C), np.float32), "wpe.weight": np.zeros((8, C), np.float32),
                                      "ln_f.weight": np.ones(C, np.float32), "ln_f.bias": np.zeros(C, np.float32),
                                      # a head of its own: with names outside the layout, a head the file lacks is never tied
                                      "lm_head.weight": np.zeros((8, C), np.float32)}
    for i in range(layers):
        p = f"h.{i}."
        tensors |= {p + "ln_1.weight": np.ones(C, np.float32), p + "ln_1.bias": np.zeros(C, np.float32),
                    p + "ln_2.weight": np.ones(C, np.float32), p + "ln_2.bias": np.zeros(C, np.float32),
                    p + "attn.c_attn.weight": np.zeros((C, 3 * C), np.float32), p + "attn.c_attn.bias": np.zeros(3 * C, np.float32),
                    p + "attn.c_proj.weight": np.zeros((C, C), np.float32), p + "attn.c_proj.bias": np.zeros(C, np.float32),
                    p + "mlp.c_fc.weight": np.zeros((C, 4 * C), np.float32), p + "mlp.c_fc.bias": np.zeros(4 * C, np.float32),
                    p + "mlp.c_proj.weight": np.zeros((4 * C, C), np.float32), p + "mlp.c_proj.bias": np.zeros(C, np.float32)}
    empty = np.zeros(0, np.float32)
    tensors |= {f"extra.{j}": empty for j in range(extra)}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"model_type": "gpt2", "n_embd": C, "n_head": 2, "n_layer": layers, "n_inner": None, "vocab_size": 8,
              "n_positions": 8, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "hostile-cases")
    for c in CHECKPOINTS:
        if c.torch:
            try:
                import torch  # noqa: F401
            except ImportError:
                continue
        print(make_checkpoint(c, out))
    (out / "sides").mkdir(parents=True, exist_ok=True)
    for s in ARRAYS:
        s.make(out / "sides" / s.name)
        print(out / "sides" / s.name)
