#!/usr/bin/env bash
# Make again what docs/page.md and the guide show: the screenshots docs/images/page-*.png (taken by the browser
# tests, tests/browser, with TRACER_SCREENSHOTS set) and docs/pages/ch17-prenorm.html, the page of Table 17.1's block
# (tests/docs/test_page_copy.py fails while it differs from what `tracer page` writes).  Needs the browser extra and
# Debian's Chromium (pip install -e '.[browser]'; apt-get install chromium).  Run it from anywhere in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p docs/pages docs/images
python -m tracer page specs/ch17-prenorm.yaml -o docs/pages/ch17-prenorm.html --force
TRACER_SCREENSHOTS=docs/images python -m pytest tests/browser -q -n 0 -p no:randomly \
    -k "opens_its_stage or table_17_1 or highlights_exactly or side_by_side or beside_its_value or lens_heatmap or language_switch"
ls -l docs/images/page-*.png docs/pages/ch17-prenorm.html
