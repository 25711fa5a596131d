#!/usr/bin/env bash
# The agent's scan for unsaved work (issue 47): a home of 50 Git
# repositories holding 100,000 files in all (a tenth of the repositories
# with an uncommitted change, one with a commit on no remote, one with a
# stash), scanned by `abode_agent::unsaved::scan` with its default limits,
# against the same questions asked by hand in one shell (`git status
# --porcelain`, `git rev-list --branches --not --remotes`, `git stash list`
# per repository), in one run, rounds interleaved. Goals: a scan under 1 s,
# and under 5% of a core at the agent's default interval (5 minutes; the
# share is the scan's CPU time over the interval).
#
# Usage: benches/unsaved-scan.sh [--rounds N] [--repositories N] [--files N]
#   --rounds N        rounds (default 7)
#   --repositories N  repositories (default 50)
#   --files N         files in all (default 100000)
# Needs: cargo, git, python3, bc.
set -euo pipefail

bench=unsaved-scan.sh
rounds=7
repositories=50
files=100000
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --repositories) repositories="$2"; shift 2 ;;
    --files) files="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/benches/lib.sh"
bench_require git python3 bc
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
(cd "$root" && cargo build --release -q -p abode-agent --example scan_unsaved)
scanner="$root/target/release/examples/scan_unsaved"

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
per_repository=$((files / repositories))
echo "making $repositories repositories of $per_repository files under $home"
for r in $(seq 1 "$repositories"); do
    repo="$home/src/project-$r"
    mkdir -p "$repo"
    git -C "$repo" init -q -b main
    git -C "$repo" remote add origin "https://git.example.com/project-$r.git"
    # A tree of a source project: 20 files a directory.
    python3 - "$repo" "$per_repository" <<'PY'
import os, sys
repo, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    d = os.path.join(repo, "pkg%03d" % (i // 20))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file%05d.txt" % i), "w") as f:
        f.write("line %d\n" % i)
PY
    git -C "$repo" add -A
    git -C "$repo" commit -q -m initial
    # Everything pushed: origin/main is where main is.
    git -C "$repo" update-ref refs/remotes/origin/main HEAD
    case $((r % 10)) in
    1) echo changed >>"$repo/pkg000/file00000.txt" ;;
    2) [ "$r" = 2 ] && git -C "$repo" commit -q --allow-empty -m "not pushed" ;;
    3) [ "$r" = 3 ] && { echo stashed >>"$repo/pkg000/file00001.txt"; git -C "$repo" stash -q; } ;;
    esac
done
# Warm the page cache and the index for both.
"$scanner" "$home" 1 >/dev/null

by_hand() {
    for repo in "$home"/src/*/; do
        git -C "$repo" status --porcelain -z >/dev/null
        git -C "$repo" rev-list --branches --not --remotes >/dev/null
        git -C "$repo" stash list >/dev/null
    done
}

printf '%-6s %10s %10s %8s %10s\n' round "scan s" "by hand s" ratio "found"
scans=()
ratios=()
for round in $(seq 1 "$rounds"); do
    read -r scan scanned unsaved truncated < <("$scanner" "$home" 1)
    start="$EPOCHREALTIME"
    by_hand
    hand="$(echo "$EPOCHREALTIME - $start" | bc -l)"
    ratio="$(echo "$scan / $hand" | bc -l)"
    scans+=("$scan")
    ratios+=("$ratio")
    printf '%-6s %10.3f %10.3f %7.2fx %10s\n' "$round" "$scan" "$hand" "$ratio" "$unsaved/$scanned${truncated/false/}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
scan_median="$(median "${scans[@]}")"
# CPU time of one scan (the example and its git children), as a share of
# the default interval.
cpu="$(python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(usage.ru_utime + usage.ru_stime)' "$scanner" "$home" 1)"
share="$(echo "100 * $cpu / 300" | bc -l)"
printf 'median scan %.3f s (goal < 1 s), %.2fx by hand; one scan %.3f s of CPU = %.3f%% of a core every 5 minutes (goal < 5%%)\n' \
    "$scan_median" "$(median "${ratios[@]}")" "$cpu" "$share"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
