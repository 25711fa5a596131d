#!/usr/bin/env bash
# Rebuilds the browser libraries the dashboard serves (the web terminal's
# xterm.js and its fit addon) from the versions pinned in
# crates/web/vendor/package-lock.json, into crates/web/assets/vendor/, where
# they are committed with their licences and compiled into the binary.
# Run it only to change a version; nothing else needs Node.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vendor="$root/crates/web/vendor"
out="$root/crates/web/assets/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$vendor/package.json" "$vendor/package-lock.json" "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
mkdir -p "$out"
modules="$work/node_modules/@xterm"
cp "$modules/xterm/lib/xterm.js" "$out/xterm.js"
cp "$modules/xterm/css/xterm.css" "$out/xterm.css"
cp "$modules/xterm/LICENSE" "$out/xterm.LICENSE"
cp "$modules/addon-fit/lib/addon-fit.js" "$out/addon-fit.js"
cp "$modules/addon-fit/LICENSE" "$out/addon-fit.LICENSE"
# The source maps are not shipped: drop their references.
sed -i '/^\/\/# sourceMappingURL=/d' "$out/xterm.js" "$out/addon-fit.js"
echo "vendored: $(cd "$out" && ls | tr '\n' ' ')"
