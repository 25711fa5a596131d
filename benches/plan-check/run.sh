#!/usr/bin/env bash
# The plan-check benchmark of issue 2: on a synthetic plan of 15,000 resources (~55 MB),
# `abode plan check` must be at least 5x faster than a jq one-liner that lists the
# deleted addresses, and its peak memory must stay below the file's size.
#
# Side by side in one hyperfine run:
#   abode        abode plan check --format json PLAN      (exit 0/3/4 are decisions, not failures)
#   jq           jq '[.resource_changes[] | select(.change.actions | index("delete")) | .address]' PLAN
#   parse floor  a bare serde_json pass over the same bytes, read into memory first
#                (crates/guard/examples/parse_floor.rs)
#   parse floor (stream)  the same pass through a buffered reader (serde_json::from_reader),
#                the floor of any reader whose memory stays below the file's size
#   parse floor (filtered)  a byte scanner drops planned_values and prior_state while
#                reading in chunks, then the rest is parsed from memory (a design aid)
# then the peak RSS of each (GNU time), and the ratios.
#
# Usage: benches/plan-check/run.sh [--runs N] [--keep DIR] [--no-build]
#   --runs N     hyperfine runs per command (default 10)
#   --keep DIR   write the plan and hyperfine's results into DIR instead of a temp dir
#   --no-build   use the release binaries already built (target/release/abode and
#                target/release/examples/parse_floor)
# Needs: cargo, python3, jq, hyperfine, GNU time at /usr/bin/time (Debian: apt-get install time).
set -euo pipefail

runs=10
keep=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done

for tool in cargo python3 jq hyperfine; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "run.sh: $tool is not on PATH" >&2
        exit 1
    fi
done
if ! /usr/bin/time -v true >/dev/null 2>&1; then
    echo "run.sh: GNU time is missing at /usr/bin/time (Debian: apt-get install time)" >&2
    exit 1
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

if [ -n "$keep" ]; then
    mkdir -p "$keep"
    work="$(cd "$keep" && pwd)"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi

if [ "$build" = 1 ]; then
    echo "== building (release)" >&2
    cargo build --release --quiet -p abode
    cargo build --release --quiet -p abode-guard --example parse_floor
fi
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
abode="$target_dir/release/abode"
floor="$target_dir/release/examples/parse_floor"
for binary in "$abode" "$floor"; do
    if [ ! -x "$binary" ]; then
        echo "run.sh: $binary is missing (run without --no-build)" >&2
        exit 1
    fi
done

plan="$work/plan.json"
echo "== generating the plan" >&2
python3 "$here/generate.py" "$plan" >&2
size_bytes="$(stat -c %s "$plan")"

# A decision is exit 0 (allow), 3 (confirm) or 4 (block); anything else means the
# benchmark would time an error path.
set +e
"$abode" plan check --format json "$plan" >"$work/abode.json" 2>"$work/abode.stderr"
abode_status=$?
set -e
case "$abode_status" in
0 | 3 | 4) ;;
*)
    echo "run.sh: abode plan check failed with exit $abode_status:" >&2
    cat "$work/abode.stderr" >&2
    exit 1
    ;;
esac
decision="$(jq -r '.decision' "$work/abode.json")"
protected="$(jq -r '.protected_changes | length' "$work/abode.json")"
deletes="$(jq '[.resource_changes[] | select(.change.actions | index("delete")) | .address] | length' "$plan")"

jq_filter='[.resource_changes[] | select(.change.actions | index("delete")) | .address]'
echo "== timing (hyperfine, $runs runs each)" >&2
# -i: abode's exit status is its decision (3 = confirm here), not a failure; the
# sanity run above already rejected real errors.
hyperfine -N -i --warmup 2 --runs "$runs" --style basic \
    --export-json "$work/hyperfine.json" \
    --export-markdown "$work/hyperfine.md" \
    -n abode "$abode plan check --format json $plan" \
    -n jq "jq '$jq_filter' $plan" \
    -n "parse floor" "$floor $plan" \
    -n "parse floor (stream)" "$floor --stream $plan" \
    -n "parse floor (filtered)" "$floor --filtered $plan" >&2

peak_rss_kib() {
    # The command's own exit status (abode's decision) does not matter here.
    /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>&1 || true
    awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt"
}
echo "== peak memory (GNU time)" >&2
rss_abode="$(peak_rss_kib "$abode" plan check --format json "$plan")"
rss_jq="$(peak_rss_kib jq "$jq_filter" "$plan")"
rss_floor="$(peak_rss_kib "$floor" "$plan")"
rss_stream="$(peak_rss_kib "$floor" --stream "$plan")"
rss_filtered="$(peak_rss_kib "$floor" --filtered "$plan")"

python3 - "$work/hyperfine.json" "$size_bytes" "$rss_abode" "$rss_jq" "$rss_floor" "$rss_stream" "$rss_filtered" "$decision" "$protected" "$deletes" <<'PY'
import json, sys
results, size, rss_abode, rss_jq, rss_floor, rss_stream, rss_filtered, decision, protected, deletes = sys.argv[1:]
size = int(size)
rss = {"abode": int(rss_abode) * 1024, "jq": int(rss_jq) * 1024, "parse floor": int(rss_floor) * 1024, "parse floor (stream)": int(rss_stream) * 1024, "parse floor (filtered)": int(rss_filtered) * 1024}
with open(results) as f:
    runs = {r["command"]: r for r in json.load(f)["results"]}
mb = lambda b: b / 1e6
print(f"plan: {mb(size):.1f} MB, 15000 resources, {deletes} changes with a delete; abode's decision: {decision} ({protected} protected changes)")
print()
print("| command | mean | stddev | min | max | user CPU | peak RSS | RSS / file size |")
print("|---|---|---|---|---|---|---|---|")
for name in ("abode", "jq", "parse floor", "parse floor (stream)", "parse floor (filtered)"):
    r = runs[name]
    print(f"| {name} | {r['mean']*1000:.0f} ms | {r['stddev']*1000:.0f} ms | {r['min']*1000:.0f} ms | {r['max']*1000:.0f} ms | {r['user']*1000:.0f} ms | {mb(rss[name]):.1f} MB | {rss[name]/size:.2f} |")
a, j, f, fs = runs["abode"]["mean"], runs["jq"]["mean"], runs["parse floor"]["mean"], runs["parse floor (stream)"]["mean"]
print()
print(f"jq / abode time:            {j/a:.1f}x   (target: at least 5x)")
print(f"abode / parse floor time:   {a/f:.2f}x   (streaming floor: {a/fs:.2f}x)")
print(f"abode peak RSS / file size: {rss['abode']/size:.2f}   (target: below 1)")
ok = j / a >= 5 and rss["abode"] < size
print(f"targets met: {'yes' if ok else 'NO'}")
PY
