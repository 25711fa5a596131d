#!/usr/bin/env bash
# Connections into workspaces (issue 14, docs/ssh.md): the throughput of
# `scp` of a file through `abode config-ssh`'s entry (OpenSSH, ProxyCommand
# `abode ssh --stdio`, the server, the agent's tunnel, the agent's SSH
# server), against a direct local copy and, when an `sshd` is installed,
# against OpenSSH to a local sshd; and the round trip of `abode ssh WS -- true`.
# Goal: at least half of plain OpenSSH's throughput.
#
# The machine this runs on is often shared: each round copies through abode
# and to the local sshd back to back (upload, then download), so both see
# the same load, and the ratios are of each round's pair; the summary gives
# the median of the rounds and the load average before and after.
#
# Usage: benches/ssh-throughput.sh [--size-mb N] [--rounds N] [--runs N] [--bin PATH]
#                                  [--sshd-cipher NAME]
#   --size-mb N  the copied file's size (default 200)
#   --rounds N   interleaved rounds of copies (default 3)
#   --runs N     round trips of `abode ssh WS -- true` (default 10)
#   --bin PATH   the abode binary (default: $ABODE_BIN, else
#                $CARGO_TARGET_DIR/release/abode or target/release/abode,
#                built if missing)
#   --sshd-cipher NAME  the cipher of the copies to the local sshd (default:
#                OpenSSH's own choice, chacha20-poly1305; abode's agent offers
#                AES-GCM only, so `aes128-gcm@openssh.com` compares like with like)
# Needs: cargo, terraform, ssh, scp, curl, python3; sshd for the comparison.
set -euo pipefail

size_mb=200
rounds=3
runs=10
bin="${ABODE_BIN:-}"
sshd_cipher=""
while [ $# -gt 0 ]; do
    case "$1" in
    --size-mb) size_mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --sshd-cipher) sshd_cipher="$2"; shift 2 ;;
    *) echo "ssh-throughput.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
for tool in terraform ssh scp curl python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "ssh-throughput.sh: $tool is not on PATH" >&2
        exit 1
    fi
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"
if [ -z "$bin" ]; then
    bin="${CARGO_TARGET_DIR:-$root/target}/release/abode"
    [ -x "$bin" ] || (cd "$root" && cargo build --release -p abode)
fi
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
work="$(mktemp -d)"
server_pid=""
sshd_pid=""
cleanup() {
    bench_cleanup "$work" "$server_pid" "$sshd_pid"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

# Bash's own clock: a python3 per reading would add its start-up (tens of
# milliseconds) to each interval.
now() { echo "$EPOCHREALTIME"; }
# MB/s of a copy of $size_mb MB that took from $1 to $2 seconds.
rate() { python3 -c "print(f'{$size_mb / ($2 - $1):.1f}')"; }

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"
export ABODE_CONFIG_DIR="$work/config"
unset ABODE_URL ABODE_TOKEN
"$bin" server --address "127.0.0.1:$port" --data-dir "$work/data" \
    >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -fsS "$url/api/v1/health" >/dev/null 2>&1 && break
    sleep 0.1
done
echo "bench-password" | "$bin" login "$url" --first-user --username bench \
    --email bench@example.com --password-stdin >/dev/null
"$bin" templates push local --directory "$root/examples/local-workspace" >/dev/null 2>&1
"$bin" create ws --template local >/dev/null 2>&1
"$bin" config-ssh --ssh-config-file "$work/ssh_config" >/dev/null
ssh_opts=(-F "$work/ssh_config" -o "UserKnownHostsFile=$work/known_hosts"
    -o StrictHostKeyChecking=accept-new -o BatchMode=yes)
# The first connection waits for the agent and records the host key.
ssh "${ssh_opts[@]}" abode.ws true

head -c "$((size_mb * 1024 * 1024))" /dev/urandom >"$work/payload"
mkdir -p "$work/local-copy"

start="$(now)"; cp "$work/payload" "$work/local-copy/payload"; sync; end="$(now)"
echo "direct local copy:            $(rate "$start" "$end") MB/s"

sshd="$(command -v sshd || true)"
[ -z "$sshd" ] && [ -x /usr/sbin/sshd ] && sshd=/usr/sbin/sshd
plain=()
if [ -n "$sshd" ]; then
    # Debian's sshd refuses to start without its privilege separation directory.
    [ -d /run/sshd ] || mkdir -p /run/sshd 2>/dev/null || true
    sshd_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
    ssh-keygen -q -t ed25519 -N "" -f "$work/user_key"
    cp "$work/user_key.pub" "$work/authorized_keys"
    "$sshd" -D -e -f /dev/null -p "$sshd_port" -h "$work/host_key" \
        -o "AuthorizedKeysFile=$work/authorized_keys" -o StrictModes=no \
        -o "PidFile=$work/sshd.pid" >"$work/sshd.log" 2>&1 &
    sshd_pid=$!
    sleep 0.5
    plain=(-P "$sshd_port" -i "$work/user_key" -o "UserKnownHostsFile=$work/known_hosts_plain"
        -o StrictHostKeyChecking=accept-new -o BatchMode=yes)
    [ -n "$sshd_cipher" ] && plain+=(-c "$sshd_cipher")
    echo "cipher of the copies to sshd: ${sshd_cipher:-the OpenSSH default}"
else
    echo "scp to a local sshd:          (no sshd installed: abode's figures only)"
fi

# One copy of the payload: "$1" is abode or sshd, "$2" up or down; prints MB/s.
copy() {
    local start end
    rm -f "$work/payload.back"
    case "$1:$2" in
    abode:up) start="$(now)"; scp -O -q "${ssh_opts[@]}" "$work/payload" abode.ws:payload; end="$(now)" ;;
    abode:down) start="$(now)"; scp -O -q "${ssh_opts[@]}" abode.ws:payload "$work/payload.back"; end="$(now)" ;;
    sshd:up) start="$(now)"; scp -O -q "${plain[@]}" "$work/payload" "127.0.0.1:$work/payload.plain"; end="$(now)" ;;
    sshd:down) start="$(now)"; scp -O -q "${plain[@]}" "127.0.0.1:$work/payload" "$work/payload.back"; end="$(now)" ;;
    esac
    if [ "$2" = down ]; then
        cmp -s "$work/payload" "$work/payload.back" || { echo "ssh-throughput.sh: the $1 download differs" >&2; exit 1; }
    fi
    rate "$start" "$end"
}

printf '%-6s %-9s %12s %12s %7s\n' round direction "abode MB/s" "sshd MB/s" ratio
results="$work/results"
for round in $(seq 1 "$rounds"); do
    for direction in up down; do
        ours="$(copy abode "$direction")"
        theirs="-"
        ratio="-"
        if [ -n "$sshd" ]; then
            theirs="$(copy sshd "$direction")"
            ratio="$(python3 -c "print(f'{$ours / $theirs:.2f}')")"
        fi
        printf '%-6s %-9s %12s %12s %7s\n' "$round" "$direction" "$ours" "$theirs" "$ratio"
        echo "$direction $ours $theirs $ratio" >>"$results"
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for direction in ("up", "down"):
    mine = [r for r in rows if r[0] == direction]
    ours = statistics.median(float(r[1]) for r in mine)
    line = f"median {direction:<5} abode {ours:7.1f} MB/s"
    if mine[0][2] != "-":
        theirs = statistics.median(float(r[2]) for r in mine)
        ratio = statistics.median(float(r[3]) for r in mine)
        line += f"   sshd {theirs:7.1f} MB/s   ratio {ratio:.2f}x (min {min(float(r[3]) for r in mine):.2f}, max {max(float(r[3]) for r in mine):.2f})"
    print(line)
PY

start="$(now)"
for _ in $(seq 1 "$runs"); do "$bin" ssh ws -- true; done
end="$(now)"
python3 -c "print(f'abode ssh ws -- true:         {($end - $start) / $runs * 1000:.0f} ms per round trip ($runs runs)')"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
