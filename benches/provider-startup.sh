#!/usr/bin/env bash
# Provider start-up cost (issue 3): the wall time of `terraform plan` on the example
# template (examples/local-workspace, abode provider) against the same shape written
# with Terraform's built-in `terraform_data` only (no provider to start), side by side
# in one hyperfine run. Both directories are applied first, so each plan refreshes a
# real state (the common case: the plans of stop and start builds).
#
# Usage: benches/provider-startup.sh [--runs N] [--bin PATH]
#   --runs N    hyperfine runs per command (default 10)
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, hyperfine, jq.
set -euo pipefail

runs=10
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "provider-startup.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
for tool in terraform hyperfine jq; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "provider-startup.sh: $tool is not on PATH" >&2
        exit 1
    fi
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "$bin" ]; then
    bin="$root/target/release/abode"
    [ -x "$bin" ] || (cd "$root" && cargo build --release -p abode)
fi
work="$(mktemp -d)"
abode_dir="$work/abode"
data_dir="$work/terraform-data"
mkdir -p "$abode_dir" "$data_dir"

cleanup() {
    (cd "$abode_dir" && terraform apply -destroy -auto-approve -no-color >/dev/null 2>&1) || true
    rm -rf "$work"
}
trap cleanup EXIT

export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
export TF_CLI_CONFIG_FILE="$work/terraform.rc"
export ABODE_VOLUMES_DIR="$work/volumes"
# A stand-in agent that just stays up: the benchmark measures Terraform and the
# provider, not the agent.
printf '#!/bin/sh\nexec sleep 3600\n' >"$work/fake-abode"
chmod +x "$work/fake-abode"
export ABODE_AGENT_BINARY="$work/fake-abode"

"$bin" provider install --mirror "$work/mirror" --cli-config "$TF_CLI_CONFIG_FILE" >/dev/null
cp "$root/examples/local-workspace/main.tf" "$abode_dir/main.tf"

# The same graph with terraform_data: two "data sources" as locals, and the five
# resources with the same dependencies and counts.
cat >"$data_dir/main.tf" <<'HCL'
locals {
  workspace   = { id = "00000000-0000-4000-8000-000000000001", name = "dev", start_count = 1 }
  owner       = { name = "developer" }
}

resource "terraform_data" "home" {
  input = { name = "home-${local.workspace.id}", labels = { owner = local.owner.name, workspace = local.workspace.name } }
}

resource "terraform_data" "protect" {
  input = { resource_id = terraform_data.home.id, mode = "confirm" }
}

resource "terraform_data" "agent" {
  count = local.workspace.start_count
  input = { os = "linux", arch = "amd64", dir = terraform_data.home.output.name }
}

resource "terraform_data" "process" {
  count = local.workspace.start_count
  input = { command = ["sh", "-c", terraform_data.agent[0].id], env = { ABODE_AGENT_TOKEN = terraform_data.agent[0].id } }
}

resource "terraform_data" "metadata" {
  input = { resource_id = terraform_data.home.id, path = terraform_data.home.output.name }
}
HCL

for dir in "$abode_dir" "$data_dir"; do
    (cd "$dir" && terraform init -no-color >/dev/null && terraform apply -auto-approve -no-color >/dev/null)
done

hyperfine --warmup 2 --runs "$runs" --export-json "$work/results.json" \
    -n "abode provider" "cd '$abode_dir' && terraform plan -no-color -lock=false >/dev/null" \
    -n "terraform_data only" "cd '$data_dir' && terraform plan -no-color -lock=false >/dev/null"

jq -r '
  (.results[] | select(.command == "abode provider") | .mean) as $abode |
  (.results[] | select(.command == "terraform_data only") | .mean) as $data |
  "terraform plan, mean: abode provider \($abode * 1000 | floor) ms, terraform_data only \($data * 1000 | floor) ms, ratio \($abode / $data * 100 | floor / 100)x, provider overhead \(($abode - $data) * 1000 | floor) ms"
' "$work/results.json"
