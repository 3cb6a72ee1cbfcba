"""A private gantry stack for the Python end-to-end tests: PostgreSQL, gantry-server, worker daemons.

GantryStack starts a private PostgreSQL (deploy/local/pg.sh in a temporary GANTRY_PG_DIR), then
gantry-server and gantry-worker daemons on 127.0.0.1 ports PORT_BASE..PORT_BASE+99 (gRPC at BASE,
serving at BASE+3, rendezvous BASE+10..BASE+40; the caller picks what else goes where), with
admin and join tokens of its own. It drives the `gantry` CLI, and stop() ends every process it
started (also the process group of one spawned with own_group) and PostgreSQL. Children die with
the test even when ctest SIGKILLs it. run_stack() is the main loop both tests share.
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_libc = ctypes.CDLL(None, use_errno=True)


class Failure(Exception):
    pass


def _die_with_parent():
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _die_with_parent_in_own_group():
    _die_with_parent()
    os.setpgrp()  # e.g. chromium's helpers follow node in its group, which stop() signals whole


class Logger:
    """Prints `[NAME HH:MM:SS] message` lines, flushed at once."""

    def __init__(self, name):
        self.name = name

    def __call__(self, msg):
        print(f"[{self.name} {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class GantryStack:
    def __init__(self, build_dir, name, port_base, log, extra_bins=None):
        """`name` names the temporary directory and the tokens; `extra_bins` adds programs (name ->
        path) that must be executable, e.g. chromium or prometheus from Debian's packages."""
        self.log = log
        self.build = os.path.abspath(build_dir)
        self.bins = {
            "gantry": os.path.join(self.build, "clients/cli/gantry"),
            "server": os.path.join(self.build, "server/gantry-server"),
            "worker": os.path.join(self.build, "workers/app/gantry-worker"),
        }
        self.bins.update(extra_bins or {})
        for program, path in self.bins.items():
            if not os.access(path, os.X_OK):
                raise Failure(f"{program}: {path} is missing (build first; Debian's programs come "
                              "from deploy/local/deps.sh)")
        self.dir = tempfile.mkdtemp(prefix=f"gantry-{name}-")
        os.chmod(self.dir, 0o755)  # the postgres user must reach its directory inside
        self.port_base = port_base
        self.grpc = f"127.0.0.1:{port_base}"
        self.serve_port = port_base + 3
        self.rendezvous = f"{port_base + 10}-{port_base + 40}"
        self.pg_env = dict(os.environ, GANTRY_PG_DIR=os.path.join(self.dir, "pg"))
        self.procs = {}
        self.watched = set()  # processes whose exit is a failure
        self.own_group = set()
        self.pg_started = False
        self.tokens = {}
        self.default_token = None  # the CLI's token when none is given; else the admin's
        self.admin_token = "gnt_admin_" + os.urandom(24).hex()
        self.admin_token_file = self._secret("admin.token", self.admin_token)
        self.join_token_file = self._secret("join.token", "gnj_" + os.urandom(20).hex())

    def _secret(self, name, value):
        """A private file (mode 0600): the programs refuse a secret others may read."""
        path = os.path.join(self.dir, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(value + "\n")
        return path

    # ------------------------------------------------------------------ processes
    def spawn(self, name, cmd, env=None, watch=True, own_group=False):
        out = open(os.path.join(self.dir, f"{name}.log"), "w")
        self.procs[name] = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir, env=env,
            preexec_fn=_die_with_parent_in_own_group if own_group else _die_with_parent)
        out.close()
        if watch:
            self.watched.add(name)
        if own_group:
            self.own_group.add(name)
        self.log(f"{name} started (pid {self.procs[name].pid})")
        return self.procs[name]

    def check_alive(self):
        for name in self.watched:
            p = self.procs[name]
            if p.poll() is not None:
                raise Failure(f"{name} exited with code {p.returncode}:\n{self.tail(name)}")

    def tail(self, name, lines=30):
        try:
            with open(os.path.join(self.dir, f"{name}.log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def wait_for(self, what, predicate, timeout):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            self.check_alive()
            try:
                last = predicate()
                if last:
                    return last
            except (OSError, urllib.error.URLError, ValueError, KeyError, Failure) as e:
                last = e
            time.sleep(0.3)
        raise Failure(f"timed out after {timeout} s waiting for {what} (last: {last})")

    def stop(self):
        """Workers get SIGINT (they drain), the rest SIGTERM; SIGKILL after 15 s."""
        for name, p in self.procs.items():
            if p.poll() is None:
                sig = signal.SIGINT if name.startswith("worker") else signal.SIGTERM
                try:
                    os.killpg(p.pid, sig) if name in self.own_group else p.send_signal(sig)
                except ProcessLookupError:
                    pass
        for name, p in self.procs.items():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if name in self.own_group:
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # any helper left behind
                except ProcessLookupError:
                    pass
        if self.pg_started:
            subprocess.run([os.path.join(ROOT, "deploy/local/pg.sh"), "stop"], env=self.pg_env,
                           capture_output=True, timeout=120)

    # ------------------------------------------------------------------ the CLI
    def cli(self, argv, token=None, timeout=120):
        env = dict(os.environ, HOME=self.dir, GANTRY_SERVER=self.grpc,
                   GANTRY_TOKEN=token or self.default_token or self.admin_token)
        env.pop("GANTRY_CA_CERT", None)
        p = subprocess.run([self.bins["gantry"]] + argv, env=env, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise Failure(f"gantry {' '.join(argv)} failed ({p.returncode}): {p.stderr.strip()}")
        return p.stdout

    def tenant(self, name):
        """Creates tenant `name` and a token for it (kept in self.tokens); returns the token."""
        self.cli(["admin", "tenants", "create", name], self.admin_token)
        self.tokens[name] = self.cli(["admin", "tokens", "create", name, "--quiet"],
                                     self.admin_token).strip().splitlines()[-1]
        return self.tokens[name]

    # ------------------------------------------------------------------ start
    def start_postgres(self):
        dsn = subprocess.run([os.path.join(ROOT, "deploy/local/pg.sh"), "start"], env=self.pg_env,
                             capture_output=True, text=True, timeout=120)
        if dsn.returncode != 0:
            raise Failure(f"pg.sh start failed: {dsn.stdout}{dsn.stderr}")
        self.pg_started = True
        self.dsn = dsn.stdout.strip().splitlines()[-1]

    def start_server(self, extra_flags):
        self.spawn("server", [
            self.bins["server"], "--listen", self.grpc, "--db", self.dsn,
            "--data-dir", os.path.join(self.dir, "data"),
            "--admin-token-file", self.admin_token_file,
            "--join-token-file", self.join_token_file,
            "--heartbeat-interval-ms", "500"] + list(extra_flags))
        self.wait_for("gantry-server to listen",
                      lambda: "listening on" in open(os.path.join(self.dir, "server.log")).read(),
                      90)

    def start_worker(self, name, slots, extra_flags=()):
        """One gantry-worker daemon (process "worker"), waited for until the server lists it."""
        self.spawn("worker", [
            self.bins["worker"], "daemon", "--server", self.grpc,
            "--join-token-file", self.join_token_file, "--name", name,
            "--slots", str(slots), "--threads", "1", "--cache-dir", os.path.join(self.dir, "cache"),
            "--advertise-host", "127.0.0.1", "--rendezvous-ports", self.rendezvous,
            "--serve-port", str(self.serve_port)] + list(extra_flags))
        self.wait_for("the worker to connect", lambda: any(
            w.get("connected") for w in json.loads(self.cli(["admin", "workers", "--json"], self.admin_token))), 90)


def run_stack(log, make_stack, body, keep, tails):
    """Makes the stack, runs body(stack), stops everything; 0 on success. On failure (or SIGTERM,
    SIGINT) it prints the tails of the `tails` logs and keeps the work directory; `keep` keeps it
    always."""

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stack = None
    ok = False
    t0 = time.time()
    try:
        stack = make_stack()
        log(f"work dir {stack.dir}")
        body(stack)
        ok = True
        log(f"PASS in {time.time() - t0:.0f} s")
    except (Failure, KeyboardInterrupt) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        if stack is not None:
            for name in tails:
                print(f"---- {name} log tail\n{stack.tail(name, 60)}", file=sys.stderr)
    finally:
        if stack is not None:
            stack.stop()
            if ok and not keep:
                shutil.rmtree(stack.dir, ignore_errors=True)
            else:
                print(f"logs kept in {stack.dir}", file=sys.stderr)
    return 0 if ok else 1
