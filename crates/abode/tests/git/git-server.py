#!/usr/bin/env python3
"""A real Git smart-HTTP server for Abode's external auth tests
(crates/abode/tests/e2e_external_auth.rs), whose every request is
authorized by a real OAuth 2.0 server's token introspection.

Debian's nginx serves `git http-backend` through Debian's fcgiwrap (both run
here, as whoever runs this, from a private temporary directory), and asks,
with auth_request, a token checker that this script runs on another loopback
port. The checker takes the request's Authorization header,
`Basic base64(USER:TOKEN)` (any USER; the token is the password) or
`Bearer TOKEN`, and POSTs token, client_id and client_secret (in the body,
client_secret_post) to the introspection endpoint (RFC 7662). An active
access token lets the request through with REMOTE_USER set to the token's
`sub`, so `git http-backend` also allows pushes; anything else (no
credential, an unknown, expired or revoked token, a refresh token, an
unreadable header) is answered 401 with `WWW-Authenticate: Basic
realm="git"`, so that git asks its credential helper or askpass.

    git-server.py --repos DIR --state DIR --introspect URL
                  --client-id ID --client-secret-file FILE

--repos is the project root: http://127.0.0.1:PORT/NAME.git is DIR/NAME.git
(every repository there is exported). In --state the checker appends every
token it was shown, one a line, to tokens-seen.txt, and one line per
decision to decisions.txt: `active SUB` or `inactive` (a request without a
credential is refused without a line); nginx writes nginx-access.log and
nginx-error.log there. The client secret is read from its file (one line)
and never printed.

On start it prints one JSON line on stdout, {"url": "http://127.0.0.1:PORT",
"pid": PID}, and runs until its stdin reaches EOF or it gets SIGTERM or
SIGINT; then it stops nginx, fcgiwrap and the checker and removes its
temporary directory. A setup error is one line on stderr and exit status 1.

Standard library only: it runs with Debian's /usr/bin/python3 as well as any
other Python 3 on PATH.
"""

import argparse
import base64
import binascii
import ctypes
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REALM = 'Basic realm="git"'
USER_HEADER = "X-Remote-User"
NGINX_TEMP = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


class SetupError(Exception):
    pass


def find_program(name, debian_package):
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if not found:
        raise SetupError(f"{name} is not installed (Debian package {debian_package}; scripts/bootstrap.sh installs it)")
    return found


def git_http_backend():
    git = shutil.which("git")
    if not git:
        raise SetupError("git is not on PATH")
    try:
        exec_path = subprocess.run([git, "--exec-path"], check=True, stdout=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, universal_newlines=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        raise SetupError(f"git --exec-path failed: {error}")
    backend = os.path.join(exec_path, "git-http-backend")
    if not os.access(backend, os.X_OK):
        raise SetupError(f"git http-backend is not at {backend}")
    return backend


def nginx_string(value):
    """`value` as a double-quoted nginx string (nginx cannot escape `$`)."""
    if any(c in value for c in '"$\\\n\r{};'):
        raise SetupError(f"path not usable in an nginx configuration: {value!r}")
    return f'"{value}"'


# ---------------------------------------------------------------- the checker

class Checker:
    """Decides on one request's Authorization header by introspection."""

    def __init__(self, introspect, client_id, client_secret, state):
        self.introspect = introspect
        self.client_id = client_id
        self.client_secret = client_secret
        self.tokens_seen = os.path.join(state, "tokens-seen.txt")
        self.decisions = os.path.join(state, "decisions.txt")
        self.lock = threading.Lock()

    def append(self, path, line):
        with self.lock, open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    @staticmethod
    def token_of(authorization):
        """The token in an Authorization header, or None."""
        scheme, _, rest = (authorization or "").strip().partition(" ")
        rest = rest.strip()
        if scheme.lower() == "bearer":
            return rest or None
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(rest, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                return None
            _user, colon, password = decoded.partition(":")
            return password if colon and password else None
        return None

    def decide(self, authorization):
        """The token's `sub` when it is an active access token, else None.
        Raises OSError/ValueError when the introspection itself failed."""
        token = self.token_of(authorization)
        if token is None:
            return None
        self.append(self.tokens_seen, token.replace("\r", " ").replace("\n", " "))
        body = urllib.parse.urlencode({
            "token": token,
            "token_type_hint": "access_token",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
        }).encode()
        request = urllib.request.Request(self.introspect, data=body, headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        })
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.loads(response.read().decode("utf-8"))
        sub = answer.get("sub")
        # Only access tokens: a refresh token introspects as active too, but
        # without a token_type.
        active = (answer.get("active") is True
                  and str(answer.get("token_type", "")).lower() in ("bearer", "dpop")
                  and isinstance(sub, str) and sub != ""
                  and all(c.isprintable() for c in sub))
        self.append(self.decisions, f"active {sub}" if active else "inactive")
        return sub if active else None


def make_handler(checker):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            try:
                sub = checker.decide(self.headers.get("Authorization"))
            except (OSError, ValueError) as error:
                # The introspection endpoint failed: nginx answers 500.
                print(f"git-server: introspection failed: {error}", file=sys.stderr, flush=True)
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if sub is None:
                self.send_response(401)
                self.send_header("WWW-Authenticate", REALM)
            else:
                self.send_response(200)
                self.send_header(USER_HEADER, sub)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_POST = do_GET

        def log_message(self, *_args):
            pass

    return Handler


# ---------------------------------------------------------- child processes

def start_reaper():
    """Forks (before any thread exists) a watchdog that outlives this launcher
    by a moment: it is told each child's process group and the temporary
    directory through a pipe, and should the pipe close without `done` (this
    launcher was killed, SIGKILL included) it kills those groups and removes
    the directory. fcgiwrap's workers, for one, outlive a killed fcgiwrap."""
    read_end, write_end = os.pipe()  # not inherited by the children (O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(write_end)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)  # holds neither stdin nor the JSON line's stdout
            os.dup2(null, 1)
            groups, directories, done = [], [], False
            with os.fdopen(read_end, "r", encoding="utf-8") as lines:
                for line in lines:
                    kind, _, value = line.rstrip("\n").partition(" ")
                    if kind == "group":
                        groups.append(int(value))
                    elif kind == "tmp":
                        directories.append(value)
                    elif kind == "done":
                        done = True
            if not done:
                for pgid in groups:
                    try:
                        os.killpg(pgid, signal.SIGKILL)
                    except OSError:
                        pass
                for directory in directories:
                    shutil.rmtree(directory, ignore_errors=True)
        finally:
            os._exit(0)
    os.close(read_end)
    return pid, os.fdopen(write_end, "w", buffering=1, encoding="utf-8")


def spawn(argv, reaper):
    """A child in a process group of its own, which the reaper learns."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               start_new_session=True)
    reaper.write(f"group {process.pid}\n")
    return process


def become_subreaper():
    """Orphaned descendants (fcgiwrap's workers: fcgiwrap leaves them behind
    when it stops) become this launcher's children, for it to reap, rather
    than zombies of an init that may reap them late (Linux's
    PR_SET_CHILD_SUBREAPER; without it they are only reaped later)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def processes():
    """(pid, state, ppid, pgid) of every process, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as file:
                fields = file.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) >= 3:
            yield int(entry), fields[0], int(fields[1]), int(fields[2])


def reap_orphans(keep=(), group=None):
    """Reaps the zombies among this launcher's adopted orphans (not the
    children in `keep`, which subprocess waits for; only `group`'s if given)."""
    me = os.getpid()
    for pid, state, ppid, pgid in processes():
        if (state == "Z" and ppid == me and pid not in keep
                and (group is None or pgid == group)):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def group_alive(pgid):
    """Whether a process group has a member that is not a zombie; reaps its
    zombies that are this launcher's adopted orphans."""
    reap_orphans(keep=(pgid,), group=pgid)
    return any(group == pgid and state != "Z" for _pid, state, _ppid, group in processes())


def stop(process):
    """Stops a child and everything in its process group (nginx's workers,
    fcgiwrap's workers and the CGI programs they run)."""
    if process is None:
        return
    pgid = process.pid  # start_new_session: the child leads its own group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + 5
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not group_alive(pgid):
            return
    process.wait()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nginx_config(tmp, state, port, checker_port, fcgi_socket, backend, repos):
    q = nginx_string
    user = ""
    if os.geteuid() == 0:
        # As root nginx's workers would become `nobody`, who can neither reach
        # fcgiwrap's socket nor use the private temporary directory: they stay
        # this user (nginx only switches users when its master is root).
        user = (f"user {pwd.getpwuid(os.geteuid()).pw_name} "
                f"{grp.getgrgid(os.getegid()).gr_name};\n")
    temp = {name: os.path.join(tmp, name) for name in NGINX_TEMP}
    # http-backend runs git's programs from its exec path; PATH is for hooks.
    path = ":".join(dict.fromkeys([os.path.dirname(shutil.which("git") or "/usr/bin"),
                                   "/usr/local/bin", "/usr/bin", "/bin"]))
    return f"""# Written by crates/abode/tests/git/git-server.py
{user}daemon off;
master_process on;
worker_processes 1;
pid {q(os.path.join(tmp, "nginx.pid"))};
error_log {q(os.path.join(state, "nginx-error.log"))} warn;
events {{ worker_connections 256; }}
http {{
  access_log {q(os.path.join(state, "nginx-access.log"))};
  client_body_temp_path {q(temp["client_body"])};
  proxy_temp_path {q(temp["proxy"])};
  fastcgi_temp_path {q(temp["fastcgi"])};
  uwsgi_temp_path {q(temp["uwsgi"])};
  scgi_temp_path {q(temp["scgi"])};
  # Pushes of any size (nginx's default limit is 1 MB).
  client_max_body_size 0;
  server_tokens off;

  server {{
    listen 127.0.0.1:{port};

    location = /_introspect {{
      internal;
      proxy_pass http://127.0.0.1:{checker_port}/check;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header Authorization $http_authorization;
    }}

    location / {{
      auth_request /_introspect;
      auth_request_set $git_user $upstream_http_x_remote_user;

      fastcgi_pass {q("unix:" + fcgi_socket)};
      fastcgi_param SCRIPT_FILENAME {q(backend)};
      fastcgi_param GIT_PROJECT_ROOT {q(repos)};
      fastcgi_param GIT_HTTP_EXPORT_ALL "1";
      fastcgi_param REMOTE_USER $git_user;
      fastcgi_param HOME {q(tmp)};
      fastcgi_param PATH {q(path)};
      fastcgi_param PATH_INFO $uri;
      fastcgi_param QUERY_STRING $query_string;
      fastcgi_param REQUEST_METHOD $request_method;
      fastcgi_param CONTENT_TYPE $content_type;
      fastcgi_param CONTENT_LENGTH $content_length;
      fastcgi_param REQUEST_URI $request_uri;
      fastcgi_param SERVER_PROTOCOL $server_protocol;
      fastcgi_param GATEWAY_INTERFACE CGI/1.1;
      fastcgi_param REMOTE_ADDR $remote_addr;
      fastcgi_param REMOTE_PORT $remote_port;
      fastcgi_param SERVER_ADDR $server_addr;
      fastcgi_param SERVER_PORT $server_port;
      fastcgi_param SERVER_NAME $server_name;
      fastcgi_param HTTP_GIT_PROTOCOL $http_git_protocol;
    }}
  }}
}}
"""


def wait_for(condition, seconds, failed):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        if failed():
            return False
        time.sleep(0.05)
    return False


# ----------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description="A Git smart-HTTP server whose requests are authorized by OAuth 2.0 token introspection.")
    parser.add_argument("--repos", required=True, help="the directory of bare repositories (GIT_PROJECT_ROOT)")
    parser.add_argument("--state", required=True, help="where tokens-seen.txt, decisions.txt and nginx's logs go")
    parser.add_argument("--introspect", required=True, help="the OAuth 2.0 server's introspection endpoint")
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret-file", required=True)
    args = parser.parse_args()
    reaper_pid, reaper = start_reaper()
    become_subreaper()

    stopping = threading.Event()

    def on_signal(_signum, _frame):
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    tmp = None
    server = None
    fcgiwrap = None
    nginx = None
    try:
        nginx_bin = find_program("nginx", "nginx")
        fcgiwrap_bin = find_program("fcgiwrap", "fcgiwrap")
        backend = git_http_backend()
        repos = os.path.abspath(args.repos)
        state = os.path.abspath(args.state)
        if not os.path.isdir(repos):
            raise SetupError(f"--repos {args.repos}: not a directory")
        os.makedirs(state, exist_ok=True)
        try:
            with open(args.client_secret_file, encoding="utf-8") as file:
                secret = file.read().strip("\r\n")
        except OSError as error:
            raise SetupError(f"--client-secret-file {args.client_secret_file}: {error.strerror}")
        if not secret:
            raise SetupError(f"--client-secret-file {args.client_secret_file}: empty")
        if urllib.parse.urlparse(args.introspect).scheme not in ("http", "https"):
            raise SetupError(f"--introspect {args.introspect}: not an http(s) URL")

        # Short, private, and in /tmp: a unix socket's path is at most 107 bytes.
        tmp = tempfile.mkdtemp(prefix="abode-git-")
        reaper.write(f"tmp {tmp}\n")
        checker = Checker(args.introspect, args.client_id, secret, state)
        server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(checker))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        checker_port = server.server_address[1]

        fcgi_socket = os.path.join(tmp, "fcgiwrap.sock")
        fcgiwrap = spawn([fcgiwrap_bin, "-c", "4", "-s", f"unix:{fcgi_socket}"], reaper)
        if not wait_for(lambda: os.path.exists(fcgi_socket), 10, lambda: fcgiwrap.poll() is not None):
            raise SetupError(f"fcgiwrap did not start (exit status {fcgiwrap.poll()})")

        # nginx binds before it writes its pid file; a port taken meanwhile
        # makes it exit, and another port is tried.
        pid_file = os.path.join(tmp, "nginx.pid")
        for name in NGINX_TEMP:
            os.mkdir(os.path.join(tmp, name), 0o700)
        config_file = os.path.join(tmp, "nginx.conf")
        error_log = os.path.join(state, "nginx-error.log")
        for _attempt in range(5):
            port = free_port()
            try:
                log_start = os.path.getsize(error_log)
            except OSError:
                log_start = 0
            with open(config_file, "w", encoding="utf-8") as out:
                out.write(nginx_config(tmp, state, port, checker_port, fcgi_socket, backend, repos))
            nginx = spawn([nginx_bin, "-p", tmp, "-e", error_log, "-c", config_file], reaper)

            def started():
                try:
                    with open(pid_file, encoding="utf-8") as file:
                        return file.read().strip() == str(nginx.pid)
                except OSError:
                    return False

            if wait_for(started, 10, lambda: nginx.poll() is not None):
                break
            status = nginx.poll()
            stop(nginx)
            nginx = None
            if status is None:
                raise SetupError("nginx did not start within 10 seconds")
            try:
                with open(error_log, encoding="utf-8", errors="replace") as file:
                    file.seek(log_start)
                    said = file.read().strip().splitlines()
            except OSError:
                said = []
            if not any("Address already in use" in line for line in said):
                raise SetupError(f"nginx did not start: {said[-1] if said else f'exit status {status}'}")
        else:
            raise SetupError(f"nginx did not start: no free port (see {error_log})")

        print(json.dumps({"url": f"http://127.0.0.1:{port}", "pid": os.getpid()}), flush=True)

        def read_stdin():
            # The file descriptor, not sys.stdin: a thread blocked in a
            # buffered read would hold its lock at the interpreter's exit.
            try:
                while os.read(0, 65536):
                    pass
            except OSError:
                pass
            stopping.set()

        threading.Thread(target=read_stdin, daemon=True).start()
        ticks = 0
        while not stopping.wait(0.5):
            if nginx.poll() is not None or fcgiwrap.poll() is not None:
                print("git-server: error: nginx or fcgiwrap exited", file=sys.stderr, flush=True)
                return 1
            ticks += 1
            if ticks % 10 == 0:
                reap_orphans(keep=(nginx.pid, fcgiwrap.pid, reaper_pid))
        return 0
    except SetupError as error:
        print(f"git-server: error: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        # Ignore further signals while cleaning up.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop(nginx)
        stop(fcgiwrap)
        if server is not None:
            server.shutdown()
            server.server_close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        reaper.write("done\n")
        reaper.close()
        os.waitpid(reaper_pid, 0)


if __name__ == "__main__":
    sys.exit(main())
