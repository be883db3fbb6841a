#!/usr/bin/env bash
# Run the three versions of the chapter's block and diff each against specs/ch17-prenorm.yaml:
# the correct NumPy and PyTorch versions must agree (exit 0), the buggy one must be caught at norm1 (exit 1).
# Usage: examples/your-implementation/check.sh     (exits 0 when all three behave; the torch one is skipped without torch)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
spec="$here/../../specs/ch17-prenorm.yaml"
tracer="${TRACER:-tracer}"  # a command: TRACER="python -m tracer" works too
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0

expect() {  # expect SCRIPT EXIT FIRST_STAGE
    local script="$1" want="$2" stage="$3" out code got
    if ! "$python" "$here/$script" "$work/$script.npz"; then
        echo "FAIL  $script: the script itself failed"; fail=1; return
    fi
    out="$($tracer diff "$spec" "$work/$script.npz" --json)"; code=$?
    got="$(printf '%s' "$out" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["first_diverging"])')"
    if [ "$code" -eq "$want" ] && [ "$got" = "$stage" ]; then
        echo "ok    $script: exit $code, first diverging stage $got"
    else
        echo "FAIL  $script: expected exit $want and '$stage', got exit $code and '$got'"; fail=1
    fi
}

expect numpy_block.py 0 None
expect numpy_block_buggy.py 1 norm1
if "$python" -c "import torch" 2>/dev/null; then
    expect torch_block.py 0 None
else
    echo "skip  torch_block.py: torch is not installed (pip install torch)"
fi
exit $fail
