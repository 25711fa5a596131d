#!/usr/bin/env bash
# From `abode create` to the agent `ready` (issue 50), against the same steps
# by hand, in one run, rounds interleaved (the side that goes first
# alternating) so that load that comes and goes weighs on both alike.
#
# Abode's side, each round: `abode create wsN --template local` of the
# example template (examples/local-workspace) on a server with the defaults
# (Terraform sandboxed, the state backend, as root a network and a uid per
# workspace), timed to the end of the create build (the command returns),
# then to the agent's `ready` (its tunnel up and its start script run: the
# workspace's answer polled every 10 ms with curl).
#
# By hand, each round: the template and the provider mirror in a fresh
# directory with no state, `terraform init / plan -out / show -json / apply
# PLAN` (a create: volume, agent, script, process), timed to the end of the
# apply, and to the later of that end and the agent's first connection to
# the URL it was given. By hand there is no server for the agent to be
# ready with: a listener on that URL notes when the agent, started by
# `abode_process`, dials it (usually during the apply, which goes on after
# the process is up). So the "ready" ratio charges Abode with the agent's
# handshake and its start script, which the hand side does not have; the
# build ratio compares like with like.
#
# Each round's workspace is stopped afterwards, untimed (by hand: a stop
# apply), so that agents do not pile up.
#
# Usage: benches/create-to-ready.sh [--rounds N] [--bin PATH]
#   --rounds N  rounds (default 8)
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, jq, curl, python3 (benches/lib.sh).
set -euo pipefail

bench=create-to-ready.sh
rounds=8
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/benches/lib.sh"
bench_require terraform jq curl python3
bin="$(bench_binary "$root" "$bin")"
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
template="$root/examples/local-workspace"
work="$(mktemp -d)"
chmod 755 "$work"
server_pid=""
catcher_pid=""
cleanup() {
    for n in $(seq 1 "$rounds"); do
        "$bin" stop "ws$n" >/dev/null 2>&1 || true
    done
    # Agents started by hand run from under $work.
    bench_cleanup "$work" "$server_pid" "$catcher_pid"
}
trap cleanup EXIT
# As Abode runs Terraform (crates/terraform AUTOMATION_ENV).
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0 TF_DISABLE_PLUGIN_TLS=1

bench_start_server "$bin" "$work" 1
"$bin" templates push local --directory "$template" >/dev/null 2>&1
token="$(jq -r .token "$ABODE_CONFIG_DIR/session.json")"

# The hand side's agent URL: a listener that writes the time of each
# connection it accepts (one line each) and closes it.
catcher_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 - "$catcher_port" "$work/dials" <<'PY' &
import socket, sys, time
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(64)
while True:
    connection, _ = listener.accept()
    with open(sys.argv[2], "a") as dials:
        dials.write(f"{time.time():.6f}\n")
    connection.close()
PY
catcher_pid=$!
"$bin" provider install --mirror "$work/mirror" --cli-config "$work/terraform.rc" >/dev/null
cat >"$work/by-hand.sh" <<SCRIPT
#!/usr/bin/env bash
# One build by hand in \$1 (made fresh by a create): \$2 is the transition.
set -euo pipefail
export TF_CLI_CONFIG_FILE="$work/terraform.rc"
dir="\$1"
if [ "\$2" = start ]; then
    mkdir -p "\$dir/volumes"
    cp -r "$template"/. "\$dir/tf"/
    rm -rf "\$dir/tf/.terraform" "\$dir/tf/.terraform.lock.hcl"
fi
cd "\$dir/tf"
export ABODE_WORKSPACE_TRANSITION="\$2"
export ABODE_VOLUMES_DIR="\$dir/volumes"
export ABODE_PROCESS_LOGS_DIR="\$dir/process-logs"
export ABODE_AGENT_URL="http://127.0.0.1:$catcher_port"
export ABODE_AGENT_BINARY="$bin"
terraform init -input=false -json >/dev/null
terraform plan -input=false -json -out plan.tfplan >/dev/null
terraform show -json plan.tfplan >plan.json
terraform apply -input=false -json plan.tfplan >/dev/null
SCRIPT
chmod +x "$work/by-hand.sh"

now() { echo "$EPOCHREALTIME"; }
# Abode's create of workspace NAME: "build_s ready_s".
abode_once() {
    local name="$1" start built status
    start="$(now)"
    "$bin" create "$name" --template local >"$work/create.log" 2>&1 \
        || { echo "$bench: abode create failed: $(tail -1 "$work/create.log")" >&2; return 1; }
    built="$(now)"
    for _ in $(seq 1 3000); do
        status="$(curl -fsS -H "Authorization: Bearer $token" "$server_url/api/v1/workspaces/$name" \
            | jq -r .workspace.agent.status)"
        [ "$status" = ready ] && break
        sleep 0.01
    done
    [ "$status" = ready ] || { echo "$bench: the agent of $name is not ready ($status)" >&2; return 1; }
    python3 -c "print(f'{$built - $start:.3f} {$(now) - $start:.3f}')"
}
# The same by hand in a fresh dir: "build_s ready_s" (ready: the apply
# ended and the agent dialed).
hand_once() {
    local dir="$work/hand-$1" start built dialed
    mkdir -p "$dir/tf"
    : >"$work/dials"
    start="$(now)"
    "$work/by-hand.sh" "$dir" start >"$work/hand.log" 2>&1 \
        || { echo "$bench: the create by hand failed: $(tail -1 "$work/hand.log")" >&2; return 1; }
    built="$(now)"
    for _ in $(seq 1 3000); do
        [ -s "$work/dials" ] && break
        sleep 0.005
    done
    dialed="$(head -1 "$work/dials")"
    [ -n "$dialed" ] || { echo "$bench: the agent started by hand never dialed" >&2; return 1; }
    python3 -c "print(f'{$built - $start:.3f} {max($dialed, $built) - $start:.3f}')"
}

# One untimed round of each first: caches, the mirror's first use.
abode_once ws0 >/dev/null && "$bin" stop ws0 >/dev/null 2>&1
hand_once 0 >/dev/null && "$work/by-hand.sh" "$work/hand-0" stop >/dev/null 2>&1
results="$work/results"
printf '%-6s %12s %12s %12s %12s\n' round "abode build" "hand build" "abode ready" "hand ready"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
        a="$(abode_once "ws$round")" || exit 1
        h="$(hand_once "$round")" || exit 1
    else
        h="$(hand_once "$round")" || exit 1
        a="$(abode_once "ws$round")" || exit 1
    fi
    read -r a_build a_ready <<<"$a"
    read -r h_build h_ready <<<"$h"
    printf '%-6s %12s %12s %12s %12s\n' "$round" "$a_build" "$h_build" "$a_ready" "$h_ready"
    echo "$a_build $h_build $a_ready $h_ready" >>"$results"
    "$bin" stop "ws$round" >/dev/null 2>&1 || true
    "$work/by-hand.sh" "$work/hand-$round" stop >/dev/null 2>&1 || true
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
med = lambda i: statistics.median(r[i] for r in rows) * 1000
ratio = lambda i, j: statistics.median(r[i] / r[j] for r in rows)
print(f"medians: create build {med(0):.0f} ms, by hand {med(1):.0f} ms, ratio {ratio(0, 1):.2f}x; "
      f"create to ready {med(2):.0f} ms, by hand to the apply's end and the agent's dial {med(3):.0f} ms, "
      f"ratio {ratio(2, 3):.2f}x")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
