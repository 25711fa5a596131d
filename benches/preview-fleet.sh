#!/usr/bin/env bash
# Fleet preview throughput (issue 16): the wall time of `abode templates
# versions preview` of a version on N workspaces (default 100) with 3
# embedded provisioners, against N sequential runs of what each preview plan
# is, by hand: a fresh directory with the template and that workspace's
# state, `terraform init`, `plan -out`, `show -json`, with the same
# provider mirror and the same environment contract.
#
# The template is the one e2e_preview.rs uses (a protected volume, a mutable
# `tier`); version 2 renames the volume of `large` workspaces, half of the
# fleet, so half the plans are replacements the guard holds.
#
# Usage: benches/preview-fleet.sh [--workspaces N] [--bin PATH]
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, jq, curl, python3 (benches/lib.sh).
set -euo pipefail

count=100
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --workspaces) count="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "preview-fleet.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench=preview-fleet.sh
. "$root/benches/lib.sh"
bench_require terraform jq curl python3
bin="$(bench_binary "$root" "$bin")"
template="$root/crates/abode/tests/e2e_fixtures/preview-fleet"
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

export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0 TF_DISABLE_PLUGIN_TLS=1
now_ms() { date +%s%3N; }

bench_start_server "$bin" "$work" 3
url="$server_url"
"$bin" templates push fleet --directory "$template" >/dev/null 2>&1

echo "preview-fleet: creating $count workspaces (half of them large)..." >&2
seq 1 "$count" | xargs -P 3 -I{} sh -c '
    if [ $(({} % 2)) -eq 0 ]; then tier=large; else tier=small; fi
    "$0" create "w{}" --template fleet --parameter "tier=$tier" >/dev/null 2>&1
' "$bin"

mkdir -p "$work/v2"
sed -e 's|name = "home-${data.abode_workspace.me.id}"|name = data.abode_parameter.tier.value == "large" ? "large-${data.abode_workspace.me.id}" : "home-${data.abode_workspace.me.id}"|' \
    "$template/main.tf" >"$work/v2/main.tf"
"$bin" templates push fleet --directory "$work/v2" >/dev/null 2>&1

# --- The platform: one preview of every workspace.
start=$(now_ms)
set +e
"$bin" templates versions preview fleet 2 -o json >"$work/preview.json" 2>/dev/null
status=$?
set -e
preview_ms=$(( $(now_ms) - start ))
held=$(jq '.preview.held' "$work/preview.json")
planned=$(jq '[.results[] | select(.status == "planned")] | length' "$work/preview.json")
echo "preview: $planned of $count planned ($held held, exit $status) in $preview_ms ms" >&2

# --- By hand: the same plans, one after the other.
"$bin" provider install --mirror "$work/mirror" --cli-config "$work/terraform.rc" >/dev/null
export TF_CLI_CONFIG_FILE="$work/terraform.rc"
for i in $(seq 1 "$count"); do
    "$bin" workspaces state "w$i" --file "$work/state-$i.json" >/dev/null
    "$bin" show "w$i" -o json >"$work/show-$i.json"
done
start=$(now_ms)
for i in $(seq 1 "$count"); do
    if [ $((i % 2)) -eq 0 ]; then tier=large; else tier=small; fi
    dir="$(mktemp -d "$work/hand.XXXXXX")"
    cp "$work/v2/main.tf" "$dir/"
    cp "$work/state-$i.json" "$dir/terraform.tfstate"
    (
        cd "$dir"
        # Every build variable, as the platform sets them (docs/environment.md).
        export ABODE_WORKSPACE_ID="$(jq -r .id "$work/show-$i.json")" ABODE_WORKSPACE_NAME="w$i"
        export ABODE_WORKSPACE_BUILD_ID="hand-$i" ABODE_WORKSPACE_OWNER_ID=bench
        export ABODE_WORKSPACE_OWNER_NAME=bench ABODE_WORKSPACE_OWNER_EMAIL=bench@example.com
        export ABODE_TEMPLATE_ID=fleet ABODE_TEMPLATE_NAME=fleet ABODE_TEMPLATE_VERSION=2
        export ABODE_AGENT_URL="$url"
        export ABODE_WORKSPACE_TRANSITION=start ABODE_PARAMETERS="{\"tier\":\"$tier\"}"
        export ABODE_VOLUMES_DIR="$work/data/volumes"
        terraform init -input=false -json >/dev/null
        terraform plan -input=false -json -out plan.tfplan >plan.log || { tail -3 plan.log >&2; exit 1; }
        terraform show -json plan.tfplan >plan.json
    )
    rm -rf "$dir"
done
hand_ms=$(( $(now_ms) - start ))
echo "by hand: $count sequential init + plan + show in $hand_ms ms" >&2
awk -v p="$preview_ms" -v h="$hand_ms" -v n="$count" 'BEGIN {
    printf "preview of %d workspaces: %.1f s (%.0f ms each); %d sequential plans by hand: %.1f s (%.0f ms each); speed-up %.2fx\n",
        n, p / 1000, p / n, n, h / 1000, h / n, h / p
}'
