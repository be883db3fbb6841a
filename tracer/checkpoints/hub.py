"""A model named as the Hugging Face Hub names it (``owner/name``): found in the local cache, offline, or fetched with --download.

huggingface_hub keeps a model in ``<cache>/models--owner--name``: ``refs/main`` holds the commit of the main branch and
``snapshots/<commit>/`` its files, each a symlink into ``blobs/``.  The cache is HF_HUB_CACHE, else HF_HOME/hub, else
$XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, as huggingface_hub finds it.  A snapshot's file that
leads outside the cache is refused, naming it.

``download`` (``tracer import --download``: the hub extra, huggingface_hub, and a network) fetches into the same cache
only the files an import reads: config.json, tokenizer.json, the safetensors index and the shards that ``choose``
picks (``needed_shards``: those holding layer 0, whose tensors give the family's sizes, the layers traced, and every
tensor outside the layers: the embedding, the final norm, the head).  Files already in the snapshot are not fetched
again, and nothing is fetched when all of them are there.  Nothing here imports NumPy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from tracer import reading
from tracer.checkpoints.families.base import Layout
from tracer.errors import UsageError
from tracer.messages import at, msg

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")  # owner/name, as the Hub spells a model's id
COMMIT = re.compile(r"[0-9a-f]{40}")  # what huggingface_hub writes in refs/main
INDEX, SINGLE = "model.safetensors.index.json", "model.safetensors"
ALWAYS = ("config.json", "tokenizer.json", INDEX)  # fetched when the model has them, before any shard
MAX_INDEX = 64 * 1024 * 1024  # an index, a config.json: bounded before parsing


def is_name(text: str) -> bool:
    """Whether ``text`` is written as a Hub model id (owner/name): no leading dot or slash, one slash, no '..' or '--'."""
    return bool(NAME.fullmatch(text)) and ".." not in text and "--" not in text


def cache_dir() -> str:
    """Where huggingface_hub keeps its models, from the environment as huggingface_hub reads it."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return os.path.abspath(os.path.expanduser(env["HF_HUB_CACHE"]))
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return os.path.abspath(os.path.join(os.path.expanduser(home), "hub"))


def model_folder(name: str) -> str:
    return os.path.join(cache_dir(), "models--" + name.replace("/", "--"))


def snapshot(name: str) -> str | None:
    """The cached snapshot of ``name``'s main branch (refs/main), checked to stay inside the cache; None if not cached."""
    folder = model_folder(name)
    ref = os.path.join(folder, "refs", "main")
    if not os.path.isfile(ref):
        return None
    try:
        commit = reading.read_bytes(ref, 1024, msg("a commit hash")).decode("ascii", "replace").strip()
    except reading.InputRefused as e:
        raise UsageError(at(ref, e.message)) from None
    if not COMMIT.fullmatch(commit):
        raise UsageError(at(ref, msg("expected a commit hash (40 hexadecimal digits), as huggingface_hub writes it")))
    snap = os.path.join(folder, "snapshots", commit)
    if not os.path.isdir(snap):
        return None
    inside(snap)
    return snap


def inside(snap: str) -> None:
    """Refuse a snapshot (or a file of it) that leads outside the cache: tracer reads a cached model only from the cache."""
    root = os.path.realpath(cache_dir())
    for path in [snap] + [os.path.join(snap, entry) for entry in sorted(os.listdir(snap))]:
        real = os.path.realpath(path)
        if os.path.commonpath([root, real]) != root:
            raise UsageError(at(path, msg("leads outside the Hugging Face cache {cache}, to {target}; tracer reads a cached model only from inside "
                                          "the cache", cache=root, target=real)))


def not_found(name: str) -> UsageError:
    return UsageError(at(name, msg("no such file or folder, and no model in the Hugging Face cache at {folder}; download it with `hf download {name}` "
                                   "(huggingface_hub's command line), or give --download (the hub extra, huggingface_hub)",
                                   folder=model_folder(name), name=name)))


def needed_shards(weight_map: dict[str, str], layout: Layout, span: Callable[[int], tuple[int, int]] | None) -> set[str]:
    """The shards an import of ``layout`` reads: those holding layer 0 (the family reads its sizes there), the layers
    ``span(total)`` keeps (first, last; None: every layer) and every tensor outside the layers (embedding, final
    norm, head: the family reads their shapes).  A model of more than one stack (an encoder-decoder) is read whole."""
    layers = {key: layout.owner(key)[1] for key in weight_map}
    stacks = {layer[0] for layer in layers.values() if layer is not None}
    if span is None or len(stacks) != 1:
        return set(weight_map.values())
    first, last = span(1 + max(layer[1] for layer in layers.values() if layer is not None))
    return {weight_map[key] for key, layer in layers.items() if layer is None or layer[1] == 0 or first <= layer[1] <= last}


def download(name: str, choose: Callable[[dict[str, str], dict[str, Any] | None], set[str]]) -> str:
    """``name``'s snapshot with the files an import reads (``choose``: the shards, from the index's weight map and the
    config), fetched from the Hub into the cache when the snapshot lacks any of them; the snapshot's folder."""
    snap = snapshot(name)
    if snap is not None and _complete(snap, choose):
        return snap
    try:
        import huggingface_hub
    except ImportError:
        raise UsageError(at("--download", msg("fetching from the Hugging Face Hub needs huggingface_hub, which is not installed: "
                                              "pip install 'tracer[hub]'"))) from None
    cache = cache_dir()
    snap = os.path.dirname(_fetch(huggingface_hub, name, "config.json", "main", cache))
    commit = os.path.basename(snap)  # the rest from the same commit, whatever main becomes meanwhile
    try:
        files = set(huggingface_hub.list_repo_files(name, revision=commit))
    except Exception as e:  # the network, the Hub: one line saying why
        raise UsageError(at(name, msg("cannot list its files on the Hugging Face Hub: {why}", why=_why(e)))) from None
    for file in ALWAYS[1:]:
        if file in files and not os.path.lexists(os.path.join(snap, file)):
            _fetch(huggingface_hub, name, file, commit, cache)
    if INDEX in files:
        shards = choose(_weight_map(os.path.join(snap, INDEX)), _config(os.path.join(snap, "config.json")))
    elif SINGLE in files:
        shards = {SINGLE}
    else:
        raise UsageError(at(name, msg("holds neither {single} nor {index} on the Hugging Face Hub: tracer downloads safetensors checkpoints",
                                      single=SINGLE, index=INDEX)))
    for shard in sorted(shards):
        if os.path.basename(shard) != shard or shard.startswith("."):
            raise UsageError(at(os.path.join(snap, INDEX), msg("the index names the shard {name}, which is not a file beside it", name=repr(shard))))
        if not os.path.lexists(os.path.join(snap, shard)):
            _fetch(huggingface_hub, name, shard, commit, cache)
    inside(snap)
    return snap


def _complete(snap: str, choose: Callable[[dict[str, str], dict[str, Any] | None], set[str]]) -> bool:
    """Whether the cached snapshot holds config.json and every shard the import reads (then nothing is fetched)."""
    config = os.path.join(snap, "config.json")
    if not os.path.isfile(config):
        return False
    if os.path.isfile(os.path.join(snap, INDEX)):
        shards = choose(_weight_map(os.path.join(snap, INDEX)), _config(config))
        return all(os.path.isfile(os.path.join(snap, s)) for s in shards if os.path.basename(s) == s)
    return os.path.isfile(os.path.join(snap, SINGLE))


def _fetch(hub: Any, name: str, file: str, revision: str, cache: str) -> str:
    try:
        return str(hub.hf_hub_download(repo_id=name, filename=file, revision=revision, cache_dir=cache))
    except Exception as e:  # the network, the Hub, a gated model: one line saying why
        raise UsageError(at(f"{name}/{file}", msg("cannot download it from the Hugging Face Hub: {why}", why=_why(e)))) from None


def _why(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _json(path: str) -> Any:
    try:
        return reading.json_value(reading.read_bytes(path, MAX_INDEX, msg("a JSON file")), msg("a text"), finite=False)
    except reading.InputRefused as e:
        raise UsageError(at(path, e.message)) from None


def _weight_map(path: str) -> dict[str, str]:
    doc = _json(path)
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise UsageError(at(path, msg("expected a 'weight_map' of tensor names to shard files")))
    return weight_map


def _config(path: str) -> dict[str, Any] | None:
    doc = _json(path)
    return doc if isinstance(doc, dict) else None

