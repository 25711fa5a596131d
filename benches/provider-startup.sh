#!/usr/bin/env bash
# Provider start-up cost (issues 3 and 17): the wall time of `terraform plan` on the
# example template (examples/local-workspace, abode provider) against the same shape
# written with Terraform's built-in `terraform_data` only (no provider to start), side
# by side in one hyperfine run. Both directories are applied first, so each plan
# refreshes a real state (the common case: the plans of stop and start builds).
#
# The abode template is planned four ways:
#   - as Abode runs it since issue 50: through the mirror's provider-only executable
#     (`--launch-terraform`), which serves the whole command from one process that
#     Terraform reattaches to, TF_DISABLE_PLUGIN_TLS=1;
#   - as Abode ran it before: the provider-only executable started by Terraform (three
#     times a plan), TF_DISABLE_PLUGIN_TLS=1;
#   - with plugin TLS (Terraform's default when run by hand);
#   - with the whole `abode` binary in the mirror and plugin TLS (how it was before
#     issue 17: Terraform hashes the larger file at every command).
#
# Usage: benches/provider-startup.sh [--runs N] [--bin PATH]
#   --runs N    interleaved rounds, every variant once per round (default 20)
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform.
set -euo pipefail

runs=20
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "provider-startup.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
for tool in terraform; do
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
    (cd "$work/abode-whole" 2>/dev/null && TF_CLI_CONFIG_FILE="$work/whole.rc" ABODE_VOLUMES_DIR="$work/whole-volumes" \
        terraform apply -destroy -auto-approve -no-color >/dev/null 2>&1) || true
    rm -rf "$work"
}
trap cleanup EXIT

export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
unset TF_DISABLE_PLUGIN_TLS
export TF_CLI_CONFIG_FILE="$work/terraform.rc"
export ABODE_VOLUMES_DIR="$work/volumes"
# A stand-in agent that just stays up: the benchmark measures Terraform and the
# provider, not the agent.
printf '#!/bin/sh\nexec sleep 3600\n' >"$work/fake-abode"
chmod +x "$work/fake-abode"
export ABODE_AGENT_BINARY="$work/fake-abode"

provider_only="$(dirname "$bin")/terraform-provider-abode"
if [ ! -x "$provider_only" ]; then
    echo "provider-startup.sh: $provider_only is missing (cargo build --release -p abode builds it)" >&2
    exit 1
fi
"$bin" provider install --mirror "$work/mirror" --cli-config "$TF_CLI_CONFIG_FILE" >/dev/null
cp "$root/examples/local-workspace/main.tf" "$abode_dir/main.tf"
# The same template with `abode` alone installed (no provider-only file beside it).
whole_dir="$work/abode-whole"
mkdir -p "$whole_dir" "$work/whole-bin"
cp "$bin" "$work/whole-bin/abode"
"$work/whole-bin/abode" provider install --mirror "$work/whole-mirror" --cli-config "$work/whole.rc" >/dev/null 2>&1
cp "$root/examples/local-workspace/main.tf" "$whole_dir/main.tf"

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
(cd "$whole_dir" && TF_CLI_CONFIG_FILE="$work/whole.rc" ABODE_VOLUMES_DIR="$work/whole-volumes" \
    terraform init -no-color >/dev/null && TF_CLI_CONFIG_FILE="$work/whole.rc" \
    ABODE_VOLUMES_DIR="$work/whole-volumes" terraform apply -auto-approve -no-color >/dev/null)

# Interleaved rounds (each round runs every variant once, in turn) and medians:
# on a shared machine, load that comes and goes then weighs on every variant
# alike, where hyperfine's runs of one command after the other would not.
launcher="$(find "$work/mirror" -type f -name 'terraform-provider-abode_v*' | head -n 1)"
names=("abode provider, as Abode runs it (launched)" "provider started by Terraform"
    "abode provider, plugin TLS" "whole abode binary, plugin TLS (before)" "terraform_data only")
plan_variant() {
    case "$1" in
    0) (cd "$abode_dir" && TF_DISABLE_PLUGIN_TLS=1 "$launcher" --launch-terraform terraform \
        plan -no-color -lock=false >/dev/null) ;;
    1) (cd "$abode_dir" && TF_DISABLE_PLUGIN_TLS=1 terraform plan -no-color -lock=false >/dev/null) ;;
    2) (cd "$abode_dir" && terraform plan -no-color -lock=false >/dev/null) ;;
    3) (cd "$whole_dir" && TF_CLI_CONFIG_FILE="$work/whole.rc" ABODE_VOLUMES_DIR="$work/whole-volumes" \
        terraform plan -no-color -lock=false >/dev/null) ;;
    4) (cd "$data_dir" && TF_DISABLE_PLUGIN_TLS=1 terraform plan -no-color -lock=false >/dev/null) ;;
    esac
}
for round in $(seq 0 "$runs"); do
    for variant in 0 1 2 3 4; do
        start=$(date +%s%N)
        plan_variant "$variant"
        end=$(date +%s%N)
        # Round 0 warms caches and is not counted.
        [ "$round" -gt 0 ] && echo "$variant $(((end - start) / 1000))" >>"$work/times"
    done
done

ls -l "$bin" "$provider_only" | awk '{ printf "%s: %.1f MB\n", $NF, $5 / 1e6 }'
echo "terraform plan, median of $runs interleaved rounds:"
for variant in 0 1 2 3 4; do
    awk -v v="$variant" '$1 == v { print $2 }' "$work/times" | sort -n |
        awk '{ t[NR] = $1 } END { print (NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2) }' \
        >"$work/median.$variant"
done
data_median=$(cat "$work/median.4")
for variant in 0 1 2 3 4; do
    awk -v name="${names[$variant]}" -v m="$(cat "$work/median.$variant")" -v d="$data_median" \
        'BEGIN { printf "  %-42s %6.1f ms  %.2fx terraform_data only\n", name ":", m / 1000, m / d }'
done
