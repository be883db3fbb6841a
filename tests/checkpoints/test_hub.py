"""`tracer import owner/name`: a Hub name read from the local Hugging Face cache, offline, or fetched with --download.

The cache is laid out as huggingface_hub leaves a download (examples/checkpoints/hf_cache.py: blobs/, snapshots/<commit>/
symlinks, refs/main) in tmp_path, found through HF_HUB_CACHE or HF_HOME.  --download is tested against a stand-in for
the Hub (huggingface_hub's two calls replaced, serving a folder from tmp_path): never the network.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import assert_refused, example_module, run_app

from tracer.checkpoints import hub

NAME = "tiny/gpt2"
COMMIT = "c0ffee" + "0" * 34


def gpt2_folder(folder: Path, layers: int = 2) -> Path:
    example_module("checkpoints/tiny_gpt2.py").make(str(folder), layers=layers)
    return folder


def cached(tmp_path: Path, layers: int = 2) -> tuple[Path, Path]:
    """A tiny GPT-2 in tmp_path/model and the same model in the cache tmp_path/cache as tiny/gpt2; (cache, snapshot)."""
    folder = gpt2_folder(tmp_path / "model", layers)
    snap = example_module("checkpoints/hf_cache.py").lay_out(str(folder), NAME, str(tmp_path / "cache"))
    return tmp_path / "cache", Path(snap)


def stages(spec: Path, cwd: Path | None = None) -> list[dict]:
    r = run_app("run", str(spec), "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["stages"]


def test_a_hub_name_is_read_from_the_cache_offline(tmp_path):
    cache, snap = cached(tmp_path)
    r = run_app("import", NAME, "--tokens", "5,17,42,8", "-o", str(tmp_path / "cached.yaml"), env={"HF_HUB_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "cached.yaml").read_text()
    assert f"file: {snap}" in text and "from tiny/gpt2 (layout gpt2)" in text
    assert run_app("import", str(tmp_path / "model"), "--tokens", "5,17,42,8", "-o", str(tmp_path / "folder.yaml")).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert stages(tmp_path / "cached.yaml", cwd=elsewhere) == stages(tmp_path / "folder.yaml")  # the snapshot is the folder's model


@pytest.mark.parametrize("where", ["HF_HOME", "XDG_CACHE_HOME", "HOME"])
def test_the_cache_is_found_as_huggingface_hub_finds_it(tmp_path, where):
    top = tmp_path / "top"
    folder = {"HF_HOME": top / "hub", "XDG_CACHE_HOME": top / "huggingface" / "hub", "HOME": top / ".cache" / "huggingface" / "hub"}[where]
    example_module("checkpoints/hf_cache.py").lay_out(str(gpt2_folder(tmp_path / "model")), NAME, str(folder))
    env = {"HF_HUB_CACHE": None, "HF_HOME": None, "XDG_CACHE_HOME": None, where: str(top)}
    r = run_app("import", NAME, env=env)
    assert r.returncode == 0, r.stderr
    assert str(folder) in r.stdout


def test_a_name_neither_a_path_nor_cached_says_where_it_looked_and_how_to_get_it(tmp_path):
    r = run_app("import", "someone/model", env={"HF_HUB_CACHE": str(tmp_path / "cache")})
    assert_refused(r, "someone/model: no such file or folder", str(tmp_path / "cache" / "models--someone--model"), "hf download someone/model",
                   "--download")


def test_a_path_that_does_not_exist_is_not_looked_for_in_the_cache(tmp_path):
    assert_refused(run_app("import", str(tmp_path / "missing.safetensors")), "missing.safetensors: no such file or folder")


def test_a_folder_of_that_name_wins_over_the_cache(tmp_path):
    cache, _ = cached(tmp_path, layers=2)
    gpt2_folder(tmp_path / "tiny" / "gpt2", layers=1)
    r = run_app("import", NAME, cwd=tmp_path, env={"HF_HUB_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr
    assert "file: tiny/gpt2" in r.stdout and "all 1 layers" in r.stdout


def test_a_snapshot_file_leading_outside_the_cache_is_refused(tmp_path):
    cache, snap = cached(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text((snap / "config.json").read_text())
    (snap / "config.json").unlink()
    (snap / "config.json").symlink_to(outside)
    assert_refused(run_app("import", NAME, env={"HF_HUB_CACHE": str(cache)}), str(snap / "config.json"), "leads outside the Hugging Face cache",
                   str(outside))


def test_a_ref_that_is_not_a_commit_is_refused(tmp_path):
    cache, _ = cached(tmp_path)
    ref = cache / "models--tiny--gpt2" / "refs" / "main"
    ref.write_text("../../../etc")
    assert_refused(run_app("import", NAME, env={"HF_HUB_CACHE": str(cache)}), str(ref), "expected a commit hash")


@pytest.mark.parametrize("name, ok", [("openai-community/gpt2", True), ("meta-llama/Llama-3.2-1B", True), ("./gpt2", False), ("/abs/x", False),
                                      ("a/b/c", False), ("a/..", False), ("a--b/c", False), ("gpt2", False), ("a/b.safetensors", True)])
def test_what_is_written_as_a_hub_name(name, ok):
    assert hub.is_name(name) is ok


# -- --download, against a stand-in for the Hub ----------------------------------------------------
def sharded(folder: Path) -> dict[str, str]:
    """The 3-layer GPT-2 in ``folder`` split into shards as save_pretrained shards a large model: the embeddings, one
    shard a layer, the final norm; with its index and a tokenizer.json.  The weight map."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()

    def shard_of(key: str) -> str:
        parts = key.split(".")
        return f"layer{parts[2]}.safetensors" if parts[1] == "h" else ("final.safetensors" if "ln_f" in key else "embed.safetensors")

    weight_map = {k: shard_of(k) for k in tensors}
    for shard in set(weight_map.values()):
        save_file({k: v for k, v in tensors.items() if weight_map[k] == shard}, str(folder / shard), metadata={"format": "pt"})
    (folder / hub.INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "tokenizer.json").write_text("{}")
    return weight_map


class FakeHub:
    """huggingface_hub's list_repo_files and hf_hub_download over a folder: each download lays the file out in the
    cache as huggingface_hub does (refs/main written for the branch), and is recorded."""

    def __init__(self, remote: Path, fail: bool = False) -> None:
        self.remote, self.fail, self.fetched = remote, fail, []
        self.lay_out = example_module("checkpoints/hf_cache.py").lay_out

    def list_repo_files(self, repo_id: str, revision: str | None = None) -> list[str]:
        assert repo_id == NAME and revision == COMMIT
        return sorted(os.listdir(self.remote))

    def hf_hub_download(self, repo_id: str, filename: str, revision: str, cache_dir: str) -> str:
        if self.fail:
            raise OSError("Connection refused\nmore detail")
        assert repo_id == NAME and revision in ("main", COMMIT)
        self.fetched.append(filename)
        return os.path.join(self.lay_out(str(self.remote), repo_id, cache_dir, [filename], commit=COMMIT), filename)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub", reason="--download calls huggingface_hub (the hub extra)")
    remote = gpt2_folder(tmp_path / "remote", layers=3)
    sharded(remote)
    fake = FakeHub(remote)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", fake.list_repo_files)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake.hf_hub_download)
    return fake


def test_download_fetches_only_the_shards_the_layers_traced_need(tmp_path, fake_hub):
    env = {"HF_HUB_CACHE": str(tmp_path / "cache")}
    r = run_app("import", NAME, "--download", "--layers", "1-1", "-o", str(tmp_path / "one.yaml"), env=env)
    assert r.returncode == 0, r.stderr
    assert fake_hub.fetched == ["config.json", "tokenizer.json", hub.INDEX, "embed.safetensors", "final.safetensors", "layer0.safetensors",
                                "layer1.safetensors"]  # layer 0: the family's sizes; embed, final: the shapes of what is outside the layers
    assert "layer2.safetensors" not in os.listdir(tmp_path / "cache" / "models--tiny--gpt2" / "snapshots" / COMMIT)
    assert stages(tmp_path / "one.yaml")
    fake_hub.fetched.clear()
    assert run_app("import", NAME, "--download", "--layers", "1-1", env=env).returncode == 0
    assert fake_hub.fetched == []  # all there: nothing fetched
    assert run_app("import", NAME, "--download", "--layers", "2-2", env=env).returncode == 0
    assert fake_hub.fetched == ["config.json", "layer2.safetensors"]


def test_download_then_imports_as_the_folder_does(tmp_path, fake_hub):
    env = {"HF_HUB_CACHE": str(tmp_path / "cache")}
    r = run_app("import", NAME, "--download", "--tokens", "5,17,42,8", "-o", str(tmp_path / "hub.yaml"), env=env)
    assert r.returncode == 0, r.stderr
    assert run_app("import", str(fake_hub.remote), "--tokens", "5,17,42,8", "-o", str(tmp_path / "folder.yaml")).returncode == 0
    assert stages(tmp_path / "hub.yaml") == stages(tmp_path / "folder.yaml")


def test_download_refuses_a_range_the_model_does_not_have_before_fetching_shards(tmp_path, fake_hub):
    r = run_app("import", NAME, "--download", "--layers", "3-3", env={"HF_HUB_CACHE": str(tmp_path / "cache")})
    assert_refused(r, "--layers 3-3: the checkpoint has 3 layers")
    assert not any(f.endswith(".safetensors") for f in fake_hub.fetched)


def test_download_says_why_in_one_line_when_the_hub_cannot_be_reached(tmp_path, fake_hub):
    fake_hub.fail = True
    assert_refused(run_app("import", NAME, "--download", env={"HF_HUB_CACHE": str(tmp_path / "cache")}),
                   "tiny/gpt2/config.json: cannot download it from the Hugging Face Hub: OSError: Connection refused")


def test_download_of_a_path_is_refused(tmp_path):
    folder = gpt2_folder(tmp_path / "model")
    assert_refused(run_app("import", str(folder), "--download"), "--download: fetches a model the Hugging Face Hub names (owner/name)")


def test_download_without_huggingface_hub_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub raises ImportError
    assert_refused(run_app("import", NAME, "--download", env={"HF_HUB_CACHE": str(tmp_path / "cache")}),
                   "--download: fetching from the Hugging Face Hub needs huggingface_hub", "pip install 'tracer[hub]'")
