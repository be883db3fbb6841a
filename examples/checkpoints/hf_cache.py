"""Lay a model folder out as huggingface_hub's cache holds a downloaded model, so that `tracer import owner/name` finds it offline.

    python examples/checkpoints/hf_cache.py FOLDER OWNER/NAME CACHE [FILE ...]

copies FOLDER's files (or only FILE ...) into CACHE/models--OWNER--NAME as `hf download OWNER/NAME` leaves them:
each file's bytes once in blobs/ (named by their SHA-256), snapshots/<commit>/<file> a relative symlink to its blob,
and refs/main the commit.  The commit is made up (the SHA-1 of the files' names and bytes): nothing is downloaded.
Then `HF_HUB_CACHE=CACHE tracer import OWNER/NAME` reads the snapshot, as it reads a model a real download cached.
"""

from __future__ import annotations

import hashlib
import os
import sys


def lay_out(folder: str, name: str, cache: str, files: list[str] | None = None, commit: str | None = None) -> str:
    """Copy ``folder``'s ``files`` (default: every file in it) into ``cache`` as huggingface_hub caches model ``name``,
    in the snapshot of ``commit`` (default: one made up from the files); return the snapshot's folder."""
    files = sorted(files if files is not None else (f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f))))
    model = os.path.join(cache, "models--" + name.replace("/", "--"))
    made = hashlib.sha1()
    blobs = {}
    for file in files:
        with open(os.path.join(folder, file), "rb") as fh:
            data = fh.read()
        made.update(file.encode() + b"\0" + data)
        blobs[file] = (hashlib.sha256(data).hexdigest(), data)
    commit = commit or made.hexdigest()
    snapshot = os.path.join(model, "snapshots", commit)
    os.makedirs(os.path.join(model, "blobs"), exist_ok=True)
    os.makedirs(snapshot, exist_ok=True)
    os.makedirs(os.path.join(model, "refs"), exist_ok=True)
    for file, (digest, data) in blobs.items():
        with open(os.path.join(model, "blobs", digest), "wb") as fh:
            fh.write(data)
        link = os.path.join(snapshot, file)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join("..", "..", "blobs", digest), link)
    with open(os.path.join(model, "refs", "main"), "w") as fh:
        fh.write(commit)
    return snapshot


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    print(lay_out(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:] or None))
