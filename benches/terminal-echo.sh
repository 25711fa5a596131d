#!/usr/bin/env bash
# Web terminal echo (issue 33): the round trip of a keystroke in the
# dashboard's terminal, from the page's keydown to its echo drawn in the
# page, through the server, the agent's tunnel, the agent and the terminal,
# timed in the page by headless Chromium (crates/abode/tests/e2e_terminal.rs,
# bench_terminal_echo). Floor: p99 under 50 ms.
#
# Usage: benches/terminal-echo.sh [--keystrokes N] [--release]
#   --keystrokes N  keystrokes timed (default 300)
#   --release       build the test and the binary with the release profile
#                   (slow to build; the default debug build is an upper bound)
# Needs: cargo, cargo-nextest, terraform, chromium and chromium-driver
# (source scripts/bootstrap.sh).
set -euo pipefail
keystrokes=300
profile=()
while [ $# -gt 0 ]; do
    case "$1" in
    --keystrokes) keystrokes="$2"; shift 2 ;;
    --release) profile=(--cargo-profile release); shift ;;
    *) echo "terminal-echo.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
ABODE_BENCH_KEYSTROKES="$keystrokes" cargo nextest run "${profile[@]}" -p abode \
    --test e2e --run-ignored only --no-capture e2e_terminal::bench_terminal_echo 2>&1 \
    | grep -E '^terminal echo' || { echo "terminal-echo.sh: the bench failed (run it with cargo to see why)" >&2; exit 1; }
