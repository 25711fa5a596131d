#!/usr/bin/env bash
# Seeds the fuzz corpus with every fixture plan and every invalid input, one file each.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
corpus="$here/corpus/plan_reader"
mkdir -p "$corpus"
for plan in "$here"/../crates/guard/tests/fixtures/*/plan.json; do
    cp "$plan" "$corpus/fixture-$(basename "$(dirname "$plan")").json"
done
for bad in "$here"/../crates/guard/tests/invalid/*; do
    case "$bad" in *.sh | */README) continue ;; esac
    cp "$bad" "$corpus/invalid-$(basename "$bad")"
done
echo "seeded $(ls "$corpus" | wc -l) files into $corpus"
