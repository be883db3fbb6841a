"""tracer.reading, the one layer untrusted files are read through: its .npy header parser agrees with NumPy on every
header NumPy writes, its JSON bounds hold, and nothing it opens can block."""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from tracer import reading
from tracer.errors import InputRefused


@pytest.mark.parametrize("dtype", ["<f8", "<f4", "<f2", "<i8", "|u1", "|b1", ">f8", "<c16", "<U3"])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 5), (1, 2, 3, 4), (10**12, 7)])
@pytest.mark.parametrize("fortran", [False, True])
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)], ids=["v1", "v2", "v3"])
def test_the_npy_header_parser_reads_what_numpy_writes(dtype, shape, fortran, version):
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": fortran, "shape": shape}
    if version == (1, 0):
        np.lib.format.write_array_header_1_0(buffer, header)
    else:
        np.lib.format.write_array_header_2_0(buffer, header)
    if version == (3, 0):  # 3.0 is 2.0 with its text in UTF-8: the same bytes for these ASCII headers
        buffer = io.BytesIO(buffer.getvalue()[:6] + b"\x03" + buffer.getvalue()[7:])
    buffer.seek(0)
    got = reading.npy_header(buffer)
    assert (got.descr, got.fortran_order, got.shape) == (header["descr"], fortran, shape)
    assert got.offset == len(buffer.getvalue())


@pytest.mark.parametrize("text", [
    "{'descr': '<f8', 'fortran_order': False, 'shape': (" + "-" * 5000 + "2,), }",  # what literal_eval recursed on
    "{'descr': '<f8', 'fortran_order': False, 'shape': ((2,),), }",
    "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
    "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<f8', 'fortran_order': 0, 'shape': (2,)}",
    "{'descr': '<f8', 'fortran_order': False, 'shape': (" + "1, " * 65 + ")}",
    "{'descr': '<f8', 'fortran_order': False, 'shape': (123456789012345678901,)}",
    "{'descr': '<f8', 'fortran_order': False, 'shape': __import__('os')}",
    "{'descr': '<f8', 'fortran_order': False}",
    "[" * 10_000,
    "",
])
def test_a_hostile_npy_header_is_refused_without_recursion(text):
    with pytest.raises(InputRefused):
        reading.parse_npy_header(text)


def test_a_structured_dtype_is_named_as_such():
    with pytest.raises(InputRefused, match="structured array"):
        reading.parse_npy_header("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,), }")


def test_a_header_over_numpys_limit_is_refused_before_it_is_read():
    class Endless(io.RawIOBase):
        """The header's length, then bytes that would never end: the parser must stop at the length."""

        def __init__(self):
            self.head = b"\x93NUMPY\x02\x00" + (20_000_000).to_bytes(4, "little")
            self.served = 0

        def readable(self):
            return True

        def readinto(self, b):
            chunk = self.head[self.served:self.served + len(b)] or b" " * len(b)
            b[:len(chunk)] = chunk
            self.served += len(chunk)
            return len(chunk)

    stream = Endless()
    with pytest.raises(InputRefused, match="more than the 10,000 NumPy reads"):
        reading.npy_header(io.BufferedReader(stream))
    assert stream.served < 64 * 1024


@pytest.mark.parametrize("depth", [1, 3, 4, 5, 40])
def test_json_nesting_is_measured_without_recursion(depth):
    text = json.dumps({"a": "[[[{{" * 3, "b": [1, {"c": "]"}]})  # brackets inside strings do not count
    assert reading.json_depth_within(text, 3) and not reading.json_depth_within(text, 2)
    nested = "[" * depth + "]" * depth
    assert reading.json_depth_within(nested, depth) and not reading.json_depth_within(nested, depth - 1)
    assert not reading.json_depth_within("[" * 100_000, 1000)  # unclosed: too deep, not a RecursionError


@pytest.mark.parametrize("data", [b"[" * 100_000 + b"]" * 100_000, b'{"a": [NaN]}', b'{"a": [Infinity]}',
                                  b'{"a": ' + b"9" * 5000 + b"}", b"\xff\xfe", b'{"a": '])
def test_json_value_refuses_on_one_line_naming_only_the_size(data):
    with pytest.raises(InputRefused) as e:
        reading.json_value(data, "a header", depth=4)
    text = str(e.value)
    assert f"{len(data):,} bytes" in text and "\n" not in text
    assert "NaN" not in text and "Infinity" not in text and "999" not in text


def test_json_value_within_a_budget():
    data = json.dumps({f"k{i}": [i] for i in range(10_000)}).encode()
    assert len(reading.json_value(data, "a header")) == 10_000
    with reading.within(len(data)), pytest.raises(InputRefused, match="more than --max-memory allows"):
        reading.json_value(data, "a header")
    with reading.within(None):
        assert len(reading.json_value(data, "a header")) == 10_000


def _alarm(seconds: int):
    def fire(signum, frame):
        raise TimeoutError("blocked")
    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    return old


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    fifo = tmp_path / "w.npz"
    os.mkfifo(fifo)
    old = _alarm(10)  # a blocking open would hang here: the alarm turns that into a failure
    try:
        with pytest.raises(InputRefused) as e:
            reading.open_regular(str(fifo))
        assert e.value.reason == "special"
        with pytest.raises(InputRefused):
            reading.read_bytes(str(fifo), 100, "a file")
        assert not reading.is_regular(str(fifo))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("path, reason", [("/dev/zero", "special"), ("/", "directory"), ("no/such/file", "missing"),
                                          ("a\0b", "refused")])
def test_open_regular_refuses_what_is_not_a_regular_file(path, reason):
    if path == "/dev/zero" and not os.path.exists(path):
        pytest.skip("no /dev/zero")
    with pytest.raises(InputRefused) as e:
        reading.open_regular(path)
    assert e.value.reason == reason


def test_read_bytes_stops_at_its_limit(tmp_path: Path):
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 1000)
    assert len(reading.read_bytes(str(p), 1000, "a file")) == 1000
    with pytest.raises(InputRefused, match="larger than 999 bytes"):
        reading.read_bytes(str(p), 999, "a file")


def test_paths_round_trip_between_text_and_the_system():
    for name in ("plain", "modèle", "模型/权重.npz"):
        assert reading.text_path(reading.os_path(name)) == name
