#!/usr/bin/env bash
# Connections into workspaces (issue 14, docs/ssh.md): the throughput of
# `scp` of a file through `abode config-ssh`'s entry (OpenSSH, ProxyCommand
# `abode ssh --stdio`, the server, the agent's tunnel, the agent's SSH
# server), against a direct local copy and, when an `sshd` is installed,
# against OpenSSH to a local sshd; and the round trip of `abode ssh WS -- true`.
# Goal: at least half of plain OpenSSH's throughput.
#
# Usage: benches/ssh-throughput.sh [--size-mb N] [--runs N] [--bin PATH]
#   --size-mb N  the copied file's size (default 200)
#   --runs N     round trips of `abode ssh WS -- true` (default 10)
#   --bin PATH   the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, ssh, scp, curl, python3.
set -euo pipefail

size_mb=200
runs=10
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --size-mb) size_mb="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
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
if [ -z "$bin" ]; then
    bin="$root/target/release/abode"
    [ -x "$bin" ] || (cd "$root" && cargo build --release -p abode)
fi
work="$(mktemp -d)"
server_pid=""
sshd_pid=""
cleanup() {
    for pid in "$server_pid" "$sshd_pid"; do
        if [ -n "$pid" ]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    for proc in /proc/[0-9]*; do
        case "$(readlink "$proc/cwd" 2>/dev/null)" in
        "$work"/*) kill -9 "${proc#/proc/}" 2>/dev/null || true ;;
        esac
    done
    rm -rf "$work"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

now() { python3 -c 'import time; print(time.monotonic())'; }
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

start="$(now)"; scp -O -q "${ssh_opts[@]}" "$work/payload" abode.ws:payload; end="$(now)"
echo "scp through abode (upload):   $(rate "$start" "$end") MB/s"
start="$(now)"; scp -O -q "${ssh_opts[@]}" abode.ws:payload "$work/payload.back"; end="$(now)"
echo "scp through abode (download): $(rate "$start" "$end") MB/s"
cmp -s "$work/payload" "$work/payload.back" || { echo "ssh-throughput.sh: the copy differs" >&2; exit 1; }

sshd="$(command -v sshd || true)"
[ -z "$sshd" ] && [ -x /usr/sbin/sshd ] && sshd=/usr/sbin/sshd
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
    plain=(-p "$sshd_port" -i "$work/user_key" -o "UserKnownHostsFile=$work/known_hosts_plain"
        -o StrictHostKeyChecking=accept-new -o BatchMode=yes)
    start="$(now)"; scp -O -q -P "$sshd_port" "${plain[@]:2}" "$work/payload" "127.0.0.1:$work/payload.plain"; end="$(now)"
    echo "scp to a local sshd (upload): $(rate "$start" "$end") MB/s"
else
    echo "scp to a local sshd:          (no sshd installed)"
fi

start="$(now)"
for _ in $(seq 1 "$runs"); do "$bin" ssh ws -- true; done
end="$(now)"
python3 -c "print(f'abode ssh ws -- true:         {($end - $start) / $runs * 1000:.0f} ms per round trip ($runs runs)')"
