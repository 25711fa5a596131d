#!/usr/bin/env bash
# A snapshot before a confirmed destroy (issue 47): the throughput of the
# archive the provisioner takes of a volume (one pass, every file hashed
# while it is copied, the manifest last, fsync, rename) against `tar -cf` of
# the same directory into a file on the same disk, both with the volume's
# files in the page cache (a `tar` run first warms it). The example
# template's home is filled, a new template version renames it, and the
# update's held plan is confirmed: the build log says how long the archive
# took (`snapshot of abode_volume.home: ... in S s`). Goal: at least 0.5x
# tar's throughput.
#
# Usage: benches/snapshot.sh [--mb N] [--rounds N] [--bin PATH]
#   --mb N      megabytes in the volume (default 512): a quarter in 4 KiB to
#               64 KiB files (source trees), the rest in 8 MiB files
#   --rounds N  confirmed replacements, each of a freshly filled volume
#               (default 3)
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, bwrap, curl, python3, tar.
set -euo pipefail

bench=snapshot.sh
mb=512
rounds=3
bin="${ABODE_BIN:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/benches/lib.sh"
bench_require terraform bwrap curl python3 tar
bin="$(bench_binary "$root" "$bin")"
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    "$bin" stop ws >/dev/null 2>&1 || true
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
bench_start_server "$bin" "$work" 1

now() { echo "$EPOCHREALTIME"; }
# The example with its home named PREFIX-<workspace id>, as version N.
push_version() {
    local n="$1" prefix="$2" dir="$work/template-$1"
    mkdir -p "$dir"
    sed "s/name = \"home-\${/name = \"$prefix-\${/" \
        "$root/examples/local-workspace/main.tf" >"$dir/main.tf"
    "$bin" templates push local --directory "$dir" --activate >/dev/null 2>&1 \
        || { echo "$bench: the push of version $n failed" >&2; exit 1; }
}
# Fills DIR with MB megabytes: a quarter small files, the rest 8 MiB ones.
fill() {
    python3 - "$1" "$2" <<'PY'
import os, sys
dir, mb = sys.argv[1], int(sys.argv[2])
total = mb * 1024 * 1024
small_budget, written, i = total // 4, 0, 0
chunk = os.urandom(8 * 1024 * 1024)
while written < small_budget:
    size = 4096 << (i % 5)   # 4 KiB .. 64 KiB
    sub = os.path.join(dir, "src", f"d{i // 200}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, f"f{i}.rs"), "wb") as f:
        f.write(chunk[(i * 977) % 4096:][:size])
    written += size
    i += 1
j = 0
while written < total:
    with open(os.path.join(dir, f"blob{j}.bin"), "wb") as f:
        f.write(chunk)
    written += len(chunk)
    j += 1
PY
}

push_version 1 home
"$bin" create ws --template local >/dev/null 2>&1 \
    || { echo "$bench: the create failed" >&2; exit 1; }
printf '%-6s %10s %10s %10s %10s %7s\n' round "MB" "tar s" "snap s" "snap MB/s" ratio
results="$work/results"
for round in $(seq 1 "$rounds"); do
    volume="$(ls -d "$work"/data/volumes/*/ | head -1)"
    fill "$volume" "$mb"
    bytes="$(du -sb "$volume" | cut -f1)"
    # Warm, then timed: tar into a file on the same disk.
    tar -cf "$work/warm.tar" -C "$volume" . && rm -f "$work/warm.tar"
    start="$(now)"
    tar -cf "$work/tar.tar" -C "$volume" .
    sync -f "$work/tar.tar"
    end="$(now)"
    rm -f "$work/tar.tar"
    tar_s="$(python3 -c "print(f'{$end - $start:.3f}')")"
    push_version $((round + 1)) "home$((round + 1))"
    held="$("$bin" update ws 2>&1 || true)"
    digest="$(echo "$held" | sed -n 's/.*--digest \([0-9a-f]\{64\}\).*/\1/p' | head -1)"
    [ -n "$digest" ] || { echo "$bench: the update was not held: $held" >&2; exit 1; }
    number="$("$bin" show ws --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["latest_build"]["number"])')"
    "$bin" builds confirm ws "$number" --digest "$digest" >/dev/null 2>&1 \
        || { echo "$bench: the confirmed build failed: $("$bin" builds logs ws "$number" | tail -3)" >&2; exit 1; }
    snap_s="$("$bin" builds logs ws "$number" | sed -n 's/.*snapshot of abode_volume.home: .* in \([0-9.]*\) s .*/\1/p' | head -1)"
    [ -n "$snap_s" ] || { echo "$bench: no snapshot line in build $number's log" >&2; exit 1; }
    # The record's archive is removed: each round's disk is the same.
    for id in $("$bin" retained list --output json | python3 -c 'import json,sys; print(" ".join(r["id"] for r in json.load(sys.stdin)))'); do
        "$bin" retained destroy "$id" >/dev/null 2>&1
    done
    python3 - "$round" "$bytes" "$tar_s" "$snap_s" "$results" <<'PY'
import sys
round_, size, tar_s, snap_s, results = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
mb = size / 1e6
ratio = tar_s / snap_s
print(f"{round_:<6} {mb:>10.0f} {tar_s:>10.3f} {snap_s:>10.3f} {mb / snap_s:>10.0f} {ratio:>7.2f}")
open(results, "a").write(f"{tar_s} {snap_s} {ratio}\n")
PY
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
ratios = [r[2] for r in rows]
print(f"median: tar {statistics.median(r[0] for r in rows):.3f} s, snapshot "
      f"{statistics.median(r[1] for r in rows):.3f} s, throughput {statistics.median(ratios):.2f}x tar's "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f}; goal >= 0.5x)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
