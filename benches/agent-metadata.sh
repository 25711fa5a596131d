#!/usr/bin/env bash
# Live metadata at scale (issue 48, item 3): N simulated agents (default
# 1,000) each sending K metadata keys (default 5) every second to
# `POST /api/v1/agent/metadata`, against one server. The agents are rows
# added beside the real agent of one started workspace (same workspace and
# build, their own tokens made for the bench, the real agent's `watch`), so
# every report is authenticated as a real agent's is. Measured: the
# server's CPU (share of one core) and RSS while the agents are idle and
# while they report, side by side in one run: by `POST /agent/metadata` (a
# request each), then on the reports' socket (`GET /agent/metadata/stream`,
# one WebSocket per agent, a message each: what the agent uses).
# Goal: under 5% of a core and 200 MB RSS over idle agents.
#
# Usage: benches/agent-metadata.sh [--agents N] [--keys K] [--seconds S] [--bin PATH]
#   --bin PATH   the abode binary (default: the release build, built if missing)
# Needs: cargo, terraform, curl, jq, python3.
set -euo pipefail
agents=1000
keys=5
seconds=30
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --agents) agents="$2"; shift 2 ;;
    --keys) keys="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "agent-metadata.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench=agent-metadata.sh
. "$root/benches/lib.sh"
bench_require terraform curl jq python3
bin="$(bench_binary "$root" "$bin")"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

mkdir -p "$work/template"
{
    cat <<'TF'
terraform {
  required_providers {
    abode = { source = "abode/abode" }
  }
}
data "abode_workspace" "me" {}
resource "abode_agent" "main" {
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
TF
    for k in $(seq 1 "$keys"); do
        printf '  metadata {\n    key      = "k%s"\n    script   = "true"\n    interval = 1\n  }\n' "$k"
    done
    echo "}"
} >"$work/template/main.tf"
# No agent process: the bench is the agents.
bench_start_server "$bin" "$work" 1 --terraform-sandbox off
"$bin" templates push bench -d "$work/template" >/dev/null
"$bin" create ws --template bench >/dev/null

python3 - "$work/data/abode.db" "$agents" "$work/tokens" <<'PY'
import hashlib, sqlite3, sys, uuid
db, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
con = sqlite3.connect(db, timeout=30)
row = con.execute("SELECT workspace_id, build_id, created_at, env, watch FROM agents LIMIT 1").fetchone()
with open(out, "w") as tokens:
    for n in range(count):
        token = uuid.uuid4().hex + uuid.uuid4().hex
        con.execute(
            "INSERT INTO agents (id, workspace_id, build_id, name, token_hash, created_at, env, watch) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (uuid.uuid4().hex, row[0], row[1], f"bench-{n}", hashlib.sha256(token.encode()).hexdigest(),
             row[2], row[3], row[4]))
        tokens.write(token + "\n")
con.commit()
PY

# cpu PID SECONDS: the process's CPU over SECONDS, in % of one core.
cpu() {
    python3 - "$1" "$2" <<'PY'
import os, sys, time
pid, seconds = sys.argv[1], float(sys.argv[2])
def ticks():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
hz = os.sysconf("SC_CLK_TCK")
before, start = ticks(), time.monotonic()
time.sleep(seconds)
print(round((ticks() - before) / hz / (time.monotonic() - start) * 100, 1))
PY
}
rss() { awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$1/status"; }

idle_cpu="$(cpu "$server_pid" "$seconds")"
idle_rss="$(rss "$server_pid")"
# The agents' reports, by `transport`: `post` (a request each) or `stream`
# (one WebSocket per agent, a message each: what the agent uses).
load() {
    python3 - "$server_url" "$work/tokens" "$keys" "$((seconds + 10))" "$1" <<'PY'
import base64, http.client, json, os, socket, struct, sys, threading, time, urllib.parse
url, tokens_file, keys, seconds, transport = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
tokens = [line.strip() for line in open(tokens_file) if line.strip()]
parsed = urllib.parse.urlparse(url)
host = parsed.netloc
sent = [0]; failed = [0]; lock = threading.Lock()
end = time.monotonic() + seconds

def ws_open(token):
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET /api/v1/agent/metadata/stream HTTP/1.1\r\nHost: {host}\r\n"
                  f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("closed during the upgrade")
        answer += chunk
    if not answer.startswith(b"HTTP/1.1 101"):
        raise OSError(answer.split(b"\r\n")[0].decode())
    return sock

def ws_send(sock, text):
    payload = text.encode(); mask = os.urandom(4); n = len(payload)
    header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

def worker(mine):
    conn = http.client.HTTPConnection(host, timeout=10)
    sockets = {}
    if transport == "stream":
        for token in mine:
            sockets[token] = ws_open(token)
    tick = time.monotonic()
    n = 0
    while time.monotonic() < end:
        for token in mine:
            body = json.dumps({"metadata": [{"key": f"k{k + 1}", "value": str(n), "age_ms": 5}
                                            for k in range(keys)]})
            try:
                if transport == "stream":
                    ws_send(sockets[token], body); ok = True
                else:
                    conn.request("POST", "/api/v1/agent/metadata", body,
                                 {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
                    response = conn.getresponse(); response.read()
                    ok = response.status == 204
            except Exception:
                conn = http.client.HTTPConnection(host, timeout=10); ok = False
            with lock:
                sent[0] += 1; failed[0] += 0 if ok else 1
        n += 1
        tick += 1.0
        time.sleep(max(0.0, tick - time.monotonic()))
threads = [threading.Thread(target=worker, args=(tokens[i::20],)) for i in range(20)]
start = time.monotonic()
for t in threads: t.start()
for t in threads: t.join()
print(sent[0], failed[0], round(sent[0] / (time.monotonic() - start)))
PY
}

echo "agents: $agents, keys each: $keys, one report a second each ($agents/s)"
echo "idle agents:      server CPU ${idle_cpu}% of a core, RSS ${idle_rss} MB"
for transport in post stream; do
    load "$transport" >"$work/load.out" &
    load_pid=$!
    sleep 8
    busy_cpu="$(cpu "$server_pid" "$seconds")"
    busy_rss="$(rss "$server_pid")"
    wait "$load_pid"
    read -r sent failed rate <"$work/load.out"
    over="$(python3 -c "print(round($busy_cpu - $idle_cpu, 1))")"
    eval "over_$transport=$over"
    echo "$transport: $sent reports ($failed failed, $rate/s); server CPU ${busy_cpu}% of a core, RSS ${busy_rss} MB; over idle: CPU ${over}%, RSS $((busy_rss - idle_rss)) MB"
done
shown="$("$bin" show ws --output json | jq '.metadata | length')"
echo "stream over idle: ${over_stream}% of a core (goal: under 5% and 200 MB); post: ${over_post}%; stream/post: $(python3 -c "print(round($over_stream / max($over_post, 0.1), 2))")x"
echo "metadata items shown for the workspace: $shown"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
