"""The command line and the library prepare a run the same way (tracer.front.prepare.prepare): the same loading
(a spec whose text alone is over --max-memory is refused before it is parsed), the same --batch/--pos range
check and the same --record/--keep policy, so they refuse the same things with the same words."""

from __future__ import annotations

import pytest
from conftest import PRE, PRE_TEXT, run_app

import tracer
from tracer.errors import UsageError


def cli_error(*args: str) -> str:
    r = run_app(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    return r.stderr.strip().removeprefix("tracer: error: ")


def api_error(**kwargs: object) -> str:
    with pytest.raises(UsageError) as e:
        tracer.trace(kwargs.pop("spec", PRE), **kwargs)  # type: ignore[arg-type]
    return e.value.message


def test_the_text_of_a_big_spec_is_refused_by_both_before_it_is_parsed(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text(PRE_TEXT + "\n# " + ",\n# ".join(["0"] * 50000) + "\n")
    cli = cli_error("run", str(big), "--max-memory", "80MB")
    api = api_error(spec=str(big), max_memory="80MB")
    assert "reading this spec" in cli and cli == api, (cli, api)


def test_the_range_check_is_one_check_with_the_options_own_names():
    assert cli_error("run", PRE, "--pos", "9") == api_error(pos=9).replace("pos 9", "--pos 9")
    assert "--batch 5" in cli_error("run", PRE, "--batch", "5") and "batch 5" in api_error(batch=5)


def test_an_unknown_kept_stage_is_refused_by_both_alike():
    cli = cli_error("run", PRE, "--keep", "ffn.hiden")
    assert cli == api_error(keep=["ffn.hiden"]) and "did you mean" in cli


def test_check_and_validate_prepare_the_same_way(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text(PRE_TEXT + "\n# " + ",\n# ".join(["0"] * 50000) + "\n")
    r = run_app("validate", str(big), "--max-memory", "80MB")
    assert r.returncode == 2 and "reading this spec" in (r.stdout + r.stderr), (r.stdout, r.stderr)
    r = run_app("check", PRE, "--stage", "ffn.hiden", "--expect", "[1]")
    assert r.returncode == 2 and "ffn.hiden" in r.stderr, (r.stdout, r.stderr)
