# Sourced by scripts/run-server, scripts/run-tests and .ci/run: installs what a
# fresh machine lacks, and fails loudly on what cannot be installed here.

# Runs a command as root: directly when we are root, else through sudo
# (without a password prompt); fails with one line when neither is possible.
abode_need_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    echo "error: installing needs root: run as root or with password-less sudo, or install it yourself: $*" >&2
    return 1
  fi
}

if ! command -v terraform >/dev/null 2>&1; then
  echo "error: terraform is not on PATH: Abode needs Terraform 1.x (tested with 1.11.4); it cannot be installed from a package registry here" >&2
  exit 1
fi

# The provider's plugin protocol (tf-provider, tonic) compiles .proto files at build time.
if ! command -v protoc >/dev/null 2>&1; then
  echo "bootstrap: installing protoc (Debian protobuf-compiler)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root apt-get install -y -qq protobuf-compiler >/dev/null || exit 1
fi

# The metrics tests check each scrape with `promtool check metrics`.
if ! command -v promtool >/dev/null 2>&1; then
  echo "bootstrap: installing promtool (Debian prometheus)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || exit 1
fi
# The notification tests deliver email to a real SMTP server (aiosmtpd,
# Debian's, run by Debian's python3 whatever python3 is first on PATH).
if ! /usr/bin/python3 -c 'import aiosmtpd' >/dev/null 2>&1; then
  echo "bootstrap: installing aiosmtpd (Debian python3-aiosmtpd)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root apt-get install -y -qq python3-aiosmtpd >/dev/null || exit 1
fi

# The web dashboard's browser tests drive Debian's headless Chromium through
# its WebDriver (chromedriver).
if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
  echo "bootstrap: installing Chromium and its WebDriver (Debian chromium, chromium-driver)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null \
    || { echo "error: cannot install Debian's chromium and chromium-driver (the web dashboard's browser tests need them)" >&2; exit 1; }
fi

# The connection tests (e2e_ssh) drive OpenSSH's client: ssh, scp.
if ! command -v ssh >/dev/null 2>&1 || ! command -v scp >/dev/null 2>&1; then
  echo "bootstrap: installing the OpenSSH client (Debian openssh-client)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root apt-get install -y -qq openssh-client >/dev/null || exit 1
fi

# Every Terraform run and workspace process runs in a bubblewrap sandbox
# (docs/security.md); setpriv (util-linux) drops root to --terraform-user.
if ! command -v bwrap >/dev/null 2>&1; then
  echo "bootstrap: installing bubblewrap (Debian bubblewrap)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null || exit 1
fi

# Each workspace runs in a network namespace of its own, connected to the
# outside by Debian's slirp4netns (user-mode networking: no bridge, no NAT
# rules, nothing left on the host when it exits; it drops its capabilities
# and chroots itself after set-up); docs/security.md.
if ! command -v slirp4netns >/dev/null 2>&1; then
  echo "bootstrap: installing slirp4netns (Debian slirp4netns)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slirp4netns >/dev/null || exit 1
fi

# The proxy tests (e2e_proxy) put Debian's nginx in front of the server,
# with deploy/nginx/abode.conf as written.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "bootstrap: installing nginx (Debian nginx)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >/dev/null || exit 1
fi

# The external auth tests (e2e_external_auth) run a Git smart-HTTP server:
# nginx with git http-backend through Debian's fcgiwrap.
if ! command -v fcgiwrap >/dev/null 2>&1 && [ ! -x /usr/sbin/fcgiwrap ]; then
  echo "bootstrap: installing fcgiwrap (Debian fcgiwrap)" >&2
  abode_need_root apt-get update -qq || exit 1
  abode_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fcgiwrap >/dev/null || exit 1
fi

# Terraform must never reach the network or prompt, and must not read a user's
# ~/.terraformrc; Abode writes its own CLI configuration for every run.
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

# The Kubernetes manifests (deploy/kubernetes) are rendered with kubectl's
# kustomize and checked against Kubernetes' schemas by PyPI's
# kubernetes-validate, pinned with hashes, in a virtualenv of its own; for
# the tests only (scripts/run-tests calls this).
abode_install_deploy_checks() {
  if ! command -v kubectl >/dev/null 2>&1; then
    echo "error: kubectl is not on PATH: the deploy tests render deploy/kubernetes with 'kubectl kustomize'" >&2
    return 1
  fi
  abode_tools="${CARGO_TARGET_DIR:-$(pwd)/target}/tools"
  abode_lock=deploy/kubernetes/validate-requirements.lock
  abode_validate_venv="$abode_tools/kubernetes-validate-$(sha256sum "$abode_lock" | cut -c1-12)"
  if [ ! -x "$abode_validate_venv/bin/kubernetes-validate" ]; then
    echo "bootstrap: installing kubernetes-validate (PyPI, $abode_lock)" >&2
    rm -rf "$abode_validate_venv"
    python3 -m venv "$abode_validate_venv" || return 1
    "$abode_validate_venv/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps -r "$abode_lock" \
      || { rm -rf "$abode_validate_venv"; echo "error: cannot install kubernetes-validate from PyPI" >&2; return 1; }
  fi
  export ABODE_KUBERNETES_VALIDATE="$abode_validate_venv/bin/kubernetes-validate"
}

# The single sign-on tests (e2e_oidc) run a real OpenID provider: the npm
# package oidc-provider on Node, pinned by crates/abode/tests/oidc's
# package-lock.json, installed again when the lock file changes.
abode_oidc_dir="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)/crates/abode/tests/oidc"
if [ -f "$abode_oidc_dir/package-lock.json" ]; then
  abode_oidc_lock="$(sha256sum "$abode_oidc_dir/package-lock.json" | cut -c1-16)"
  if [ "$(cat "$abode_oidc_dir/node_modules/.abode-lock" 2>/dev/null)" != "$abode_oidc_lock" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "error: npm is not on PATH: the single sign-on tests run oidc-provider on Node (install Node 20 and npm)" >&2
      exit 1
    fi
    echo "bootstrap: installing the test OpenID provider (npm ci, $abode_oidc_dir)" >&2
    npm ci --silent --no-audit --no-fund --prefix "$abode_oidc_dir" >/dev/null \
      || { echo "error: cannot install the test OpenID provider (npm ci in $abode_oidc_dir)" >&2; exit 1; }
    echo "$abode_oidc_lock" > "$abode_oidc_dir/node_modules/.abode-lock"
  fi
fi
