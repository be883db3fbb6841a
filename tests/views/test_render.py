"""Renderers: number formatting, elision, and renderables that print exactly what they hold."""

import io

import numpy as np
from conftest import PRE
from rich.console import Console

from tracer.engine import executor
from tracer.spec import load_spec
from tracer.views import tables as render


def test_fmt_number():
    assert render.fmt_number(1.9999800004, 6) == "1.999980"
    assert render.fmt_number(-0.0, 6) == "0.000000"
    assert render.fmt_number(-4e-9, 6) == "0.000000"  # rounds to zero: no "-0.000000"
    assert render.fmt_number(-0.5, 0) == "0"  # Python rounds -0.5 to "-0"
    assert render.fmt_number(-1.5, 0) == "-2"
    assert render.fmt_number(float("nan"), 3) == "nan"
    assert render.fmt_number(float("-inf"), 3) == "-inf"


def test_fmt_vector_elides_past_eight():
    assert render.fmt_vector([0.55, 1.31, 0.15], 6) == "[0.550000, 1.310000, 0.150000]"
    eight = list(range(8))
    assert render.fmt_vector(eight, 1) == "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]"
    assert render.fmt_vector([0.55, 1.31, 0.15] + [0.0] * 765, 6) == "[0.550000, 1.310000, 0.150000, … 768 values]"


def test_fmt_value_per_head_rows():
    a = np.arange(6.0).reshape(2, 3)
    assert render.fmt_value(a, 1) == "[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]"
    tall = np.zeros((10, 1))
    assert render.fmt_value(tall, 0) == "[[0], [0], [0], … 10 rows]"


def text_of(renderable):
    buf = io.StringIO()
    Console(file=buf, width=300, no_color=True, highlight=False).print(renderable)
    return buf.getvalue()


def test_run_view_is_a_renderable_and_prints_the_book_row():
    trace = executor.run(load_spec(PRE))
    view = render.run_view(trace, 0, 0, 6, False)
    out = text_of(view)
    assert "[1.999980, 2.999940]" in out and "t=2: [2.999964, 3.746396]" in out


def test_cells_are_not_read_as_markup():
    trace = executor.run(load_spec(PRE))
    trace.stages["x"].array = np.full((1, 3, 2), np.nan)
    out = text_of(render.trace_table(trace, 0, 0, 6, False))
    assert "[nan, nan]" in out


def test_the_settings_line_wraps_at_80_columns_instead_of_being_cut():
    import io

    from rich.console import Console

    trace = executor.run(load_spec(PRE))
    c = Console(width=80, file=io.StringIO(), no_color=True, emoji=False, highlight=False)
    c.print(render.run_view(trace, 0, 0, 6, False))
    out = c.file.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 80
    flat = " ".join(out.split())
    assert "V = 3, T_max = 3, d = 1" in flat  # was cut at 80 columns: '… V = 3, T_ma'


def test_the_settings_line_never_breaks_inside_a_pair():
    from rich.console import Console

    trace = executor.run(load_spec(PRE))
    pairs = [f"{k} = {v}" for k, v in trace.spec.dims.as_dict().items()]
    for width in range(30, 101):
        c = Console(width=width, file=io.StringIO(), no_color=True, emoji=False, highlight=False)
        c.print(render.run_view(trace, 0, 0, 6, False))
        lines = c.file.getvalue().splitlines()
        for pair in pairs:
            assert any(pair in line for line in lines), (width, pair)  # 'H = 2' whole on one line
