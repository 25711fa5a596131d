#!/usr/bin/env bash
# Regenerates the inputs the plan reader must reject that come from Terraform itself:
# a real state file, `terraform show -json` of a state (no plan), a truncated real plan,
# a real plan with format_version "2.0" and one without format_version, and a real
# Terraform 1.0 plan (format 0.2, from fixtures/tf1.0-replace) with format_version "0.3"
# and "" (versions the reader does not know).
# The other files here (not-json.txt, empty.json, array.json, ...) are written by hand.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fixtures="$here/../fixtures"

if ! command -v terraform >/dev/null 2>&1; then
    echo "regenerate.sh: terraform is not on PATH; install Terraform 1.11 to regenerate these files" >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
: >"$work/terraformrc"
export TF_CLI_CONFIG_FILE="$work/terraformrc"
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

cp "$fixtures/replace-triggers/before.tf" "$work/main.tf"
(
    cd "$work"
    terraform init -input=false -no-color >/dev/null
    terraform apply -auto-approve -input=false -no-color >/dev/null
    terraform show -json >state-show.raw.json
)
python3 "$fixtures/normalise.py" <"$work/terraform.tfstate" >"$here/state.tfstate"
python3 "$fixtures/normalise.py" <"$work/state-show.raw.json" >"$here/state-show.json"

plan="$fixtures/replace-triggers/plan.json"
# Cut in the middle of resource_changes: what a full disk or a killed pipe leaves behind.
head -c "$(($(wc -c <"$plan") / 2))" "$plan" >"$here/truncated.json"
python3 - "$plan" "$here" "$fixtures/tf1.0-replace/plan.json" <<'PY'
import json, sys
plan_path, out, old_plan_path = sys.argv[1], sys.argv[2], sys.argv[3]
with open(plan_path) as f:
    plan = json.load(f)
plan["format_version"] = "2.0"
with open(f"{out}/format-version-2.0.json", "w") as f:
    json.dump(plan, f, indent=2)
    f.write("\n")
del plan["format_version"]
with open(f"{out}/format-version-missing.json", "w") as f:
    json.dump(plan, f, indent=2)
    f.write("\n")
with open(old_plan_path) as f:
    old_plan = json.load(f)
for version, name in (("0.3", "0.3"), ("", "empty")):
    old_plan["format_version"] = version
    with open(f"{out}/format-version-{name}.json", "w") as f:
        json.dump(old_plan, f, indent=2)
        f.write("\n")
PY
echo "regenerated state.tfstate state-show.json truncated.json format-version-*.json"
