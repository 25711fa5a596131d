#!/usr/bin/env bash
# Platform overhead (issue 4): the wall time of `abode start WS` (queue, claim,
# materialise the template, init, plan, show -json, guard, apply, state saved,
# log streamed to the CLI) against the same `terraform init / plan -out /
# show -json / apply PLAN` sequence run by hand on the same template with the
# same provider mirror, side by side in one run: rounds interleaved (each
# round times one start of each side, the side that goes first alternating),
# so that load that comes and goes on a shared machine weighs on both alike;
# the medians and the median of the per-round ratios are reported. Before
# each timed start, the workspace is stopped (untimed), so both sides start a
# stopped workspace: the volume exists, the agent and its process are created.
#
# The by-hand side does what a build does around Terraform too: a fresh work
# directory with the template and the previous state copied in, and the state
# copied back after the apply. Goal (issue 50): at most 1.05x.
#
# Usage: benches/platform-overhead.sh [--runs N] [--bin PATH]
#   --runs N    rounds, one timed start of each side per round (default 10)
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, jq, curl, python3 (benches/lib.sh).
set -euo pipefail

runs=10
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "platform-overhead.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench=platform-overhead.sh
. "$root/benches/lib.sh"
bench_require terraform jq curl python3
bin="$(bench_binary "$root" "$bin")"
template="$root/examples/local-workspace"
work="$(mktemp -d)"
server_pid=""

cleanup() {
    # Workspace processes (agents) of either side run from under $work.
    bench_cleanup "$work" "$server_pid"
}
trap cleanup EXIT

# As Abode runs Terraform (crates/terraform AUTOMATION_ENV), so the two sides differ
# only by what the platform does around it.
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0 TF_DISABLE_PLUGIN_TLS=1

# --- The platform side: a server, a user, the template, a stopped workspace.
bench_start_server "$bin" "$work" 1
url="$server_url"
"$bin" templates push local --directory "$template" >/dev/null 2>&1
# Left running: each timed run is preceded by an (untimed) stop.
"$bin" create ws --template local >/dev/null 2>&1

# --- The by-hand side: the same template, provider mirror and build steps.
"$bin" provider install --mirror "$work/mirror" --cli-config "$work/terraform.rc" >/dev/null
export TF_CLI_CONFIG_FILE="$work/terraform.rc"
mkdir -p "$work/hand"
cat >"$work/by-hand.sh" <<SCRIPT
#!/usr/bin/env bash
# One build by hand: \$1 is the transition (start or stop).
set -euo pipefail
dir="\$(mktemp -d "$work/hand/build.XXXXXX")"
cp -r "$template"/. "\$dir"/
rm -rf "\$dir/.terraform" "\$dir/.terraform.lock.hcl"
[ -f "$work/hand/terraform.tfstate" ] && cp "$work/hand/terraform.tfstate" "\$dir/"
cd "\$dir"
export ABODE_WORKSPACE_TRANSITION="\$1"
export ABODE_VOLUMES_DIR="$work/hand/volumes"
export ABODE_PROCESS_LOGS_DIR="$work/hand/process-logs"
export ABODE_AGENT_URL="$url"
# As the server does: agents run this abode (the mirror holds the provider alone).
export ABODE_AGENT_BINARY="$bin"
terraform init -input=false -json >/dev/null
terraform plan -input=false -json -out plan.tfplan >/dev/null
terraform show -json plan.tfplan >plan.json
terraform apply -input=false -json plan.tfplan >/dev/null
cp terraform.tfstate "$work/hand/terraform.tfstate"
cd "$work"
rm -rf "\$dir"
SCRIPT
chmod +x "$work/by-hand.sh"
"$work/by-hand.sh" start

echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
echo "platform-overhead: $runs rounds; each timed run starts a stopped workspace" >&2
now() { echo "$EPOCHREALTIME"; }
# One timed start of SIDE (abode or hand), its stop before it untimed: seconds.
start_once() {
    local start end
    if [ "$1" = abode ]; then
        "$bin" stop ws >/dev/null 2>&1 || { echo "$bench: abode stop failed" >&2; return 1; }
        start="$(now)"
        "$bin" start ws >"$work/start.log" 2>&1 \
            || { echo "$bench: abode start failed: $(tail -1 "$work/start.log")" >&2; return 1; }
        end="$(now)"
    else
        "$work/by-hand.sh" stop >/dev/null 2>&1 || { echo "$bench: the stop by hand failed" >&2; return 1; }
        start="$(now)"
        "$work/by-hand.sh" start >"$work/start.log" 2>&1 \
            || { echo "$bench: the start by hand failed: $(tail -1 "$work/start.log")" >&2; return 1; }
        end="$(now)"
    fi
    python3 -c "print(f'{$end - $start:.3f}')"
}
# One untimed round first: caches.
start_once abode >/dev/null
start_once hand >/dev/null
results="$work/results"
printf '%-6s %10s %10s %7s\n' round "abode s" "hand s" ratio
for round in $(seq 1 "$runs"); do
    if [ $((round % 2)) = 1 ]; then
        a="$(start_once abode)" || exit 1
        h="$(start_once hand)" || exit 1
    else
        h="$(start_once hand)" || exit 1
        a="$(start_once abode)" || exit 1
    fi
    printf '%-6s %10s %10s %7s\n' "$round" "$a" "$h" "$(python3 -c "print(f'{$a / $h:.2f}')")"
    echo "$a $h" >>"$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
a = statistics.median(r[0] for r in rows)
h = statistics.median(r[1] for r in rows)
ratio = statistics.median(r[0] / r[1] for r in rows)
print(f"medians: abode start {a * 1000:.0f} ms, terraform by hand {h * 1000:.0f} ms; "
      f"median of the per-round ratios {ratio:.2f}x (goal <= 1.05x)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
