#!/usr/bin/env bash
# Run every trap in this folder and check that tracer flags it: exit code 1 and the expected
# violation kind at the expected stage (from `tracer run --json`), plus the probe's causality leaks
# (by perturbation, and proved with the backward pass: --exact).
# Usage: examples/violations/check.sh        (exits 0 when every trap is caught)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
tracer="${TRACER:-tracer}"
fail=0

expect() {  # expect FILE KIND STAGE
    local file="$here/$1" kind="$2" stage="$3" out code got
    out="$("$tracer" run "$file" --json)"; code=$?
    got="$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); v=d["violations"]; print(v[0]["kind"], v[0]["stage"]) if v else print("none")')"
    if [ "$code" -eq 1 ] && [ "$got" = "$kind $stage" ]; then
        echo "ok    $1: exit 1, $got"
    else
        echo "FAIL  $1: expected exit 1 and '$kind $stage', got exit $code and '$got'"; fail=1
    fi
}

expect ex3-layernorm-over-positions.yaml axis norm1
expect ex5-residual-broadcast.yaml broadcast residual1
expect beta-typo.yaml broadcast norm1
expect position-beyond-table.yaml position position
expect fully-masked-row.yaml nonfinite attn.weights
expect softmax-over-queries.yaml axis attention
expect router-softmax-over-positions.yaml axis gates

expect_leak() {  # expect_leak FILE STAGE [--exact]: the probe's causality check fails at STAGE
    local file="$here/$1" stage="$2" out code got
    shift 2
    out="$("$tracer" probe "$file" --json "$@")"; code=$?
    got="$(printf '%s' "$out" | python3 -c 'import json,sys; p=json.load(sys.stdin)["properties"][0]; print(p["result"], p["stage"])')"
    if [ "$code" -eq 1 ] && [ "$got" = "fail $stage" ]; then
        echo "ok    probe ${*:+$* }$(basename "$file"): exit 1, causality $got"
    else
        echo "FAIL  probe ${*:+$* }$(basename "$file"): expected exit 1 and 'fail $stage', got exit $code and '$got'"; fail=1
    fi
}

expect_leak ex3-layernorm-over-positions.yaml norm1
expect_leak ex3-layernorm-over-positions.yaml norm1 --exact     # proved with the backward pass
expect_leak softmax-over-queries.yaml attn.weights --exact
exit $fail
