# Shared by the bench scripts (source it): the tools a script needs, the
# release binary, and a server on a free port with a signed-in first user.
# Each function fails the script with one line naming it ($bench).

# bench_require TOOL...: every tool on PATH.
bench_require() {
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "$bench: $tool is not on PATH" >&2
            exit 1
        fi
    done
}

# bench_install_debian COMMAND PACKAGE: installs Debian's PACKAGE when
# COMMAND is not on PATH (as root, or through password-less sudo).
bench_install_debian() {
    local command="$1" package="$2"
    command -v "$command" >/dev/null 2>&1 && return 0
    echo "$bench: installing $package (Debian)" >&2
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    $sudo apt-get update -qq >&2 && $sudo env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$package" >/dev/null \
        || { echo "$bench: cannot install $package; install it yourself" >&2; exit 1; }
}

# bench_binary ROOT [BIN]: BIN, else the release abode (built if missing),
# as an absolute path (the scripts run it from other directories).
bench_binary() {
    local root="$1" bin="${2:-}"
    if [ -z "$bin" ]; then
        bin="${CARGO_TARGET_DIR:-$root/target}/release/abode"
        [ -x "$bin" ] || (cd "$root" && cargo build --release -p abode >&2)
    fi
    [ -x "$bin" ] || { echo "$bench: $bin is not an executable" >&2; exit 1; }
    echo "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
}

# bench_start_server BIN WORK PROVISIONERS [FLAG...]: `abode server` on a
# free port with its data in WORK/data, its log in WORK/server.log and the
# extra server flags given, and the first user `bench` signed in
# (ABODE_CONFIG_DIR=WORK/config). Sets server_url and server_pid (for the
# caller's cleanup).
bench_start_server() {
    local bin="$1" work="$2" provisioners="$3" port
    shift 3
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    server_url="http://127.0.0.1:$port"
    export ABODE_CONFIG_DIR="$work/config"
    unset ABODE_URL ABODE_TOKEN
    "$bin" server --address "127.0.0.1:$port" --data-dir "$work/data" \
        --provisioners "$provisioners" "$@" >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do
        curl -fsS "$server_url/api/v1/health" >/dev/null 2>&1 && break
        sleep 0.1
    done
    echo "bench-password" | "$bin" login "$server_url" --first-user --username bench \
        --email bench@example.com --password-stdin >/dev/null
}

# bench_cleanup WORK [PID...]: stops the given processes (a server, a
# listener; empty ones are skipped), kills every process whose working
# directory lies under WORK (workspace agents, processes run by hand) and
# removes WORK.
bench_cleanup() {
    local work="$1" pid proc
    shift
    for pid in "$@"; do
        [ -n "$pid" ] || continue
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for proc in /proc/[0-9]*; do
        case "$(readlink "$proc/cwd" 2>/dev/null)" in
        "$work"/*) kill -9 "${proc#/proc/}" 2>/dev/null || true ;;
        esac
    done
    rm -rf "$work"
}
