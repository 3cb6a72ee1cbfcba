#!/usr/bin/python3
"""A bounded chaos soak of gantry: real PostgreSQL, gantry-server and gantry-worker daemons.

It starts a private PostgreSQL (deploy/local/pg.sh in a temporary GANTRY_PG_DIR), gantry-server on a
fixed loopback port, K one-slot daemons and a tenant; for --minutes it keeps --jobs small training
jobs in flight and, at seeded random intervals, injects faults:

  kill_daemon  kill -9 of a daemon, restarted under the same name a few seconds later
  kill_rank    kill -9 of one rank process (a child of a daemon)
  kill_server  kill -9 of gantry-server, restarted on the same port and database
  stop_pg      pg_ctl stop -m fast for 5-20 s, then start again (the server must survive it)

Then it stops injecting, restarts anything down, waits (bounded) for every job to end and checks the
invariants: every job terminal; FAILED only when the restart budget ran out; every SUCCEEDED job has
a registered model whose checkpoint blob is in the server's blob store with the right sha256; no
slot leaked; no rank process left; no process died that was not killed. It prints a table and
writes a JSON report (--report). Exit status 0 only when every invariant holds. Everything it
started is stopped on exit, whatever happens.

Only the Python standard library; the server is driven through the `gantry` CLI with --json.
"""

import argparse
import ctypes
import datetime
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAULT_KINDS = ("kill_daemon", "kill_rank", "kill_server", "stop_pg")
TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # Children die with the soak even when it is SIGKILLed (e.g. by a ctest timeout).
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S")


def parse_ts(text):
    """A protobuf JSON timestamp -> seconds since the epoch."""
    if not text:
        return None
    text = text.rstrip("Z")
    if "." in text:
        head, frac = text.split(".", 1)
        text = head + "." + (frac + "000000")[:6]
    return datetime.datetime.fromisoformat(text).replace(
        tzinfo=datetime.timezone.utc).timestamp()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_table():
    """pid -> (ppid, argv) for every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) < 2 or rest[0] == "Z":
            continue
        table[int(entry)] = (int(rest[1]), argv)
    return table


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.build = os.path.abspath(args.build_dir)
        self.gantry_bin = os.path.join(self.build, "clients/cli/gantry")
        self.server_bin = os.path.join(self.build, "server/gantry-server")
        self.worker_bin = os.path.join(self.build, "workers/app/gantry-worker")
        for b in (self.gantry_bin, self.server_bin, self.worker_bin):
            if not os.access(b, os.X_OK):
                raise SystemExit(f"soak: {b} is missing; build first (deploy/local/build.sh)")
        base = args.work_dir or tempfile.mkdtemp(prefix="gantry-chaos-")
        os.makedirs(base, exist_ok=True)
        os.chmod(base, 0o755)  # the postgres user must reach the PostgreSQL directory inside it
        self.dir = base
        self.logs = os.path.join(base, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.run_id = f"s{args.seed}-{os.getpid()}"
        self.port = args.port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.pg_env = dict(os.environ, GANTRY_PG_DIR=os.path.join(base, "pg"))
        self.dsn = None
        self.pg_up = False
        self.server = None
        self.server_starts = 0
        self.workers = {}        # name -> Popen (None while killed)
        self.worker_starts = {}  # name -> count
        self.worker_names = [f"chaos-w{i + 1}" for i in range(args.workers)]
        self.admin_token_file = os.path.join(base, "admin.token")
        self.join_token_file = os.path.join(base, "join.token")
        # Secret files are private (the programs refuse others' access).
        for path, token in ((self.join_token_file, "gnj_chaos_" + os.urandom(20).hex()),
                            (self.admin_token_file, "gnt_admin_chaos_" + os.urandom(24).hex())):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(token + "\n")
        self.data_dir = os.path.join(base, "data")
        self.home = os.path.join(base, "home")
        os.makedirs(self.home, exist_ok=True)
        self.admin_token = None
        self.token = None
        self.jobs = {}        # id -> {"index", "spec", "submitted", "last": Job JSON}
        self.job_order = []
        self.submitted = 0
        self.faults = []
        self.violations = []  # (what, detail) seen during the run
        self.orphans_seen = {}  # pid -> first time seen without a live daemon parent
        self.stale_seen = {}    # pid -> first time seen running for an earlier attempt or ended job
        self.kind_bag = []
        self.t0 = time.time()

    # ---------------------------------------------------------------- logging and the CLI
    def log(self, msg):
        print(f"[soak {now_iso()} +{time.time() - self.t0:6.1f}s] {msg}", flush=True)

    def cli(self, argv, token=None, timeout=20, json_out=True, json_flag=None):
        env = dict(os.environ, HOME=self.home, GANTRY_SERVER=self.address,
                   GANTRY_TOKEN=token or self.token or "")
        env.pop("GANTRY_CA_CERT", None)
        cmd = [self.gantry_bin, "--timeout", str(max(1, timeout - 5))]
        if json_out if json_flag is None else json_flag:
            cmd.append("--json")
        try:
            p = subprocess.run(cmd + argv, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124, None, "timeout"
        out = p.stdout
        if json_out and p.returncode == 0:
            try:
                out = json.loads(p.stdout)
            except ValueError:
                return 1, None, "bad JSON: " + p.stdout[:200]
        return p.returncode, out, p.stderr.strip()

    # ---------------------------------------------------------------- PostgreSQL
    def pg(self, action):
        p = subprocess.run([os.path.join(ROOT, "deploy/local/pg.sh"), action], env=self.pg_env,
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"pg.sh {action} failed: {p.stdout}{p.stderr}")
        return p.stdout.strip()

    def pg_start(self):
        self.dsn = self.pg("start").splitlines()[-1]
        self.pg_up = True

    def pg_stop(self):
        self.pg("stop")
        self.pg_up = False

    # ---------------------------------------------------------------- server
    def start_server(self, timeout=90):
        self.server_starts += 1
        n = self.server_starts
        out_path = os.path.join(self.logs, f"server.{n}.out")
        err_path = os.path.join(self.logs, f"server.{n}.log")
        cmd = [self.server_bin, "--listen", self.address, "--db", self.dsn,
               "--data-dir", self.data_dir, "--admin-token-file", self.admin_token_file,
               "--join-token-file", self.join_token_file, "--heartbeat-interval-ms", "300",
               "--lease-timeout-ms", "3000", "--hang-timeout-seconds", "20",
               "--rank-exit-grace-seconds", "10"]
        deadline = time.time() + timeout
        while True:
            with open(out_path, "w") as out, open(err_path, "a") as err:
                self.server = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=self.dir,
                                               preexec_fn=_die_with_parent)
            while time.time() < deadline:
                with open(out_path) as f:
                    if "listening on" in f.read():
                        self.log(f"gantry-server #{n} (pid {self.server.pid}) listening on "
                                 f"{self.address}")
                        return
                if self.server.poll() is not None:
                    break
                time.sleep(0.1)
            if self.server.poll() is None:
                self.server.kill()
                self.server.wait()
            if time.time() >= deadline:
                raise RuntimeError(f"gantry-server did not start within {timeout} s; see {err_path}")
            # The port may still be held for a moment after a kill -9: try again.
            with open(err_path) as f:
                last = (f.read().strip().splitlines() or [""])[-1]
            self.log(f"gantry-server #{n} exited at start (rc {self.server.returncode}: {last}); "
                     "retrying")
            time.sleep(1)

    def server_alive(self):
        return self.server is not None and self.server.poll() is None

    # ---------------------------------------------------------------- workers
    def port_base(self, name):
        return self.args.port_base + 40 * self.worker_names.index(name)

    def start_worker(self, name):
        self.worker_starts[name] = self.worker_starts.get(name, 0) + 1
        base = self.port_base(name)
        cmd = [self.worker_bin, "daemon", "--server", self.address,
               "--join-token-file", self.join_token_file, "--name", name, "--slots", "1",
               "--threads", "1", "--cache-dir", os.path.join(self.dir, name),
               "--advertise-host", "127.0.0.1", "--rendezvous-ports", f"{base}-{base + 30}",
               "--kill-grace-ms", "2000", "--labels", f"chaos={self.run_id}"]
        log = open(os.path.join(self.logs, f"{name}.log"), "a")
        log.write(f"==== start #{self.worker_starts[name]} at {now_iso()}\n")
        log.flush()
        self.workers[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                              cwd=self.dir, preexec_fn=_die_with_parent)
        log.close()
        self.log(f"daemon {name} started (pid {self.workers[name].pid})")

    def live_daemon_pids(self):
        return {p.pid for p in self.workers.values() if p is not None and p.poll() is None}

    def our_ranks(self):
        """Rank processes of this soak: [(pid, ppid, job_id, rank, attempt)]."""
        ranks = []
        for pid, (ppid, argv) in proc_table().items():
            # The daemon starts ranks through /proc/self/exe.
            if len(argv) < 2 or argv[1] != "rank" or not (
                    argv[0].endswith("gantry-worker") or argv[0] == "/proc/self/exe"):
                continue
            if f"--server={self.address}" not in argv:
                continue
            job, rank, attempt = "?", "?", 0
            for a in argv:
                if a.startswith("--assignment="):
                    # <work>/<job_id>[/attempt-N]/rank-R/assignment.pb
                    for part in a.split("=", 1)[1].split("/"):
                        if part.startswith("job-"):
                            job = part
                        elif part.startswith("rank-"):
                            rank = part[len("rank-"):]
                        elif part.startswith("attempt-"):
                            attempt = int(part[len("attempt-"):])
            ranks.append((pid, ppid, job, rank, attempt))
        return ranks

    def workers_json(self):
        rc, out, err = self.cli(["admin", "workers"], token=self.admin_token)
        if rc != 0:
            return None
        return out.get("workers", []) if isinstance(out, dict) else out

    def wait_workers(self, idle, timeout):
        """Waits until every daemon of ours is connected (and idle when asked); returns the list."""
        deadline = time.time() + timeout
        ws = None
        while time.time() < deadline:
            ws = self.workers_json()
            if ws is not None:
                ok = 0
                for name in self.worker_names:
                    mine = [w for w in ws if w.get("name") == name and w.get("connected")]
                    if mine and (not idle or all(w["freeSlots"] == w["slots"] for w in mine)):
                        ok += 1
                if ok == len(self.worker_names):
                    return True, ws
            time.sleep(0.5)
        return False, ws

    # ---------------------------------------------------------------- jobs
    def job_spec(self, index):
        a = self.args
        world = self.rng.choice([w for w in (1, 2) if w <= a.workers])
        epochs = self.rng.choice(a.epochs)
        return {
            "displayName": f"chaos-{index}",
            "labels": {"chaos": self.run_id},
            "modelPreset": "tiny",
            "dataset": f"toymc:layout=25,events={a.events},seed={self.rng.randint(1, 5)}",
            "hyperParameters": {"epochs": epochs, "batchPerRank": 4,
                                "seed": str(self.rng.randint(1, 1 << 30))},
            "worldSize": world,
            "resourcesPerRank": {"device": "DEVICE_KIND_CPU", "threads": 1},
            "checkpointPolicy": {"everyEpochs": a.checkpoint_every_epochs,
                                 "everySteps": a.checkpoint_every_steps, "keepLast": 2},
            "maxRestarts": a.max_restarts,
            "validation": {"showersPerBin": 20},
            "modelName": f"chaos-{self.run_id}-{index}",
        }

    def submit_pending(self):
        """Submits the next job; retried with the same request id until the server takes it."""
        index = self.submitted
        if not hasattr(self, "_pending_spec") or self._pending_spec[0] != index:
            self._pending_spec = (index, self.job_spec(index))
        spec = self._pending_spec[1]
        path = os.path.join(self.dir, f"job-{index}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        rc, out, err = self.cli(["jobs", "submit", "--spec", path,
                                 "--request-id", f"chaos-{self.run_id}-{index}"])
        if rc != 0:
            self.log(f"submit of job {index} failed for now ({err[:120]}); will retry")
            return False
        self.jobs[out["id"]] = {"index": index, "spec": spec, "submitted": time.time(), "last": out}
        self.job_order.append(out["id"])
        self.submitted += 1
        self.log(f"submitted {out['id']} (#{index}: world {spec['worldSize']}, "
                 f"{spec['hyperParameters']['epochs']} epochs)")
        return True

    def refresh_jobs(self):
        for jid in self.job_order:
            j = self.jobs[jid]
            if j["last"]["state"] in TERMINAL:
                continue
            rc, out, err = self.cli(["jobs", "get", jid], timeout=15)
            if rc == 0:
                if out["state"] != j["last"]["state"]:
                    self.log(f"{jid} #{j['index']}: {j['last']['state']} -> {out['state']} "
                             f"({out.get('reason', '')}) restarts {out.get('restarts', 0)}")
                j["last"] = out

    def in_flight(self):
        return sum(1 for j in self.jobs.values() if j["last"]["state"] not in TERMINAL)

    def job_events(self, jid):
        rc, out, err = self.cli(["jobs", "watch", jid], timeout=90, json_out=False, json_flag=True)
        events = []
        for line in (out or "").splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
        return events

    # ---------------------------------------------------------------- watchdog of the processes
    def check_processes(self):
        """Notices processes that died without being killed and orphaned ranks; restarts the dead."""
        if self.server is not None and self.server.poll() is not None:
            self.violations.append(("server_exited", f"gantry-server #{self.server_starts} exited "
                                    f"with {self.server.returncode} without being killed "
                                    f"(pg up: {self.pg_up})"))
            self.log(f"VIOLATION: gantry-server exited with {self.server.returncode}")
            self.server = None
            if self.pg_up:
                self.start_server()
        for name, p in list(self.workers.items()):
            if p is not None and p.poll() is not None:
                self.violations.append(("daemon_exited",
                                        f"{name} exited with {p.returncode} without being killed"))
                self.log(f"VIOLATION: daemon {name} exited with {p.returncode}")
                self.start_worker(name)
        daemons = self.live_daemon_pids()
        now = time.time()
        seen = set()
        stale_now = set()
        for pid, ppid, job, rank, attempt in self.our_ranks():
            j = self.jobs.get(job)
            if j is not None and (attempt < j["last"].get("attempt", 0)
                                  or j["last"]["state"] in TERMINAL):
                # A rank of an earlier attempt, or of an ended job: it must be stopped within the
                # server's rank exit grace and the daemon's kill grace.
                stale_now.add(pid)
                first = self.stale_seen.setdefault(pid, now)
                if first > 0 and now - first > self.args.stale_grace:
                    why = (f"the job ended {j['last']['state']}" if j["last"]["state"] in TERMINAL
                           else f"the job is at attempt {j['last'].get('attempt')} "
                                f"({j['last']['state']})")
                    self.violations.append(("stale_rank", f"rank {rank} of {job} attempt {attempt} "
                                            f"(pid {pid}) still ran {now - first:.0f} s after "
                                            f"{why}"))
                    self.log(f"VIOLATION: stale rank pid {pid} of {job} attempt {attempt}: {why}")
                    self.stale_seen[pid] = -1  # reported once
            if ppid in daemons:
                continue
            seen.add(pid)
            first = self.orphans_seen.setdefault(pid, (now, ppid, job, rank))
            if now - first[0] > self.args.orphan_grace and first[0] > 0:
                self.violations.append(("orphan_rank", f"rank {rank} of {job} (pid {pid}) ran "
                                        f"{now - first[0]:.0f} s without its daemon (ppid {ppid})"))
                self.log(f"VIOLATION: orphan rank pid {pid} of {job}")
                self.orphans_seen[pid] = (-1, ppid, job, rank)  # reported once
        for pid in list(self.orphans_seen):
            if pid not in seen:
                del self.orphans_seen[pid]
        for pid in list(self.stale_seen):
            if pid not in stale_now:
                del self.stale_seen[pid]

    # ---------------------------------------------------------------- faults
    def jobs_on_daemon(self, name):
        p = self.workers.get(name)
        if p is None:
            return []
        return sorted({job for _, ppid, job, _, _ in self.our_ranks() if ppid == p.pid})

    def next_kind(self):
        kinds = [k for k in FAULT_KINDS if k in self.args.faults]
        if not self.kind_bag:
            self.kind_bag = list(kinds)
            self.rng.shuffle(self.kind_bag)
        return self.kind_bag.pop()

    def inject(self):
        kind = self.next_kind()
        fault = {"kind": kind, "time": time.time(), "t": round(time.time() - self.t0, 1)}
        if kind == "kill_rank":
            ranks = [r for r in self.our_ranks() if r[1] in self.live_daemon_pids()]
            if not ranks:
                # Nothing runs: wait a little for one, then fall back to killing a daemon.
                for _ in range(20):
                    time.sleep(1)
                    ranks = [r for r in self.our_ranks() if r[1] in self.live_daemon_pids()]
                    if ranks:
                        break
            if not ranks:
                kind = fault["kind"] = "kill_daemon"
                fault["note"] = "no rank was running: a daemon was killed instead"
            else:
                ranks.sort()
                pid, ppid, job, rank, attempt = self.rng.choice(ranks)
                self.mark(fault)
                os.kill(pid, signal.SIGKILL)
                fault.update(target=f"rank {rank} of {job} attempt {attempt} (pid {pid})", jobs=[job])
                self.log(f"FAULT kill -9 rank {rank} of {job} attempt {attempt} (pid {pid})")
        if kind == "kill_daemon":
            name = self.rng.choice(self.worker_names)
            jobs = self.jobs_on_daemon(name)
            down = self.rng.uniform(*self.args.daemon_down)
            self.mark(fault)
            p = self.workers[name]
            p.kill()
            p.wait()
            self.workers[name] = None
            fault.update(target=name, jobs=jobs, down_seconds=round(down, 1))
            self.log(f"FAULT kill -9 daemon {name} (jobs {jobs}); restarting in {down:.1f} s")
            self.sleep_watching(down)
            self.start_worker(name)
            ok, _ = self.wait_workers(idle=False, timeout=60)
            fault["reconnected_seconds"] = round(time.time() - fault["time"], 1) if ok else None
        elif kind == "kill_server":
            down = self.rng.uniform(*self.args.server_down)
            jobs = sorted({job for _, _, job, _, _ in self.our_ranks()})
            self.mark(fault)
            self.server.kill()
            self.server.wait()
            self.server = None
            fault.update(target="gantry-server", jobs=jobs, down_seconds=round(down, 1))
            self.log(f"FAULT kill -9 gantry-server (ranks of {jobs} running); restart in {down:.1f} s")
            self.sleep_watching(down)
            self.start_server()
            ok, _ = self.wait_workers(idle=False, timeout=60)
            fault["recovered_seconds"] = round(time.time() - fault["time"], 1) if ok else None
        elif kind == "stop_pg":
            down = self.rng.uniform(*self.args.pg_down)
            jobs = sorted({job for _, _, job, _, _ in self.our_ranks()})
            self.mark(fault)
            self.pg_stop()
            fault.update(target="postgresql", jobs=jobs, down_seconds=round(down, 1))
            self.log(f"FAULT PostgreSQL stopped for {down:.1f} s (ranks of {jobs} running)")
            self.sleep_watching(down)
            self.pg_start()
            fault["server_survived"] = self.server_alive()
            if not fault["server_survived"]:
                self.log("VIOLATION: gantry-server did not survive the PostgreSQL outage")
            # Recovered when the server answers a query that reads the database again.
            deadline = time.time() + 120
            while time.time() < deadline:
                self.check_processes()
                if self.cli(["jobs", "list", "--limit", "1"], timeout=15)[0] == 0:
                    break
                time.sleep(0.5)
            fault["recovered_seconds"] = round(time.time() - fault["time"] - down, 1)
        self.faults.append(fault)

    def mark(self, fault):
        fault["time"] = time.time()
        fault["t"] = round(fault["time"] - self.t0, 1)

    def sleep_watching(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            time.sleep(min(0.5, max(0, end - time.time())))

    # ---------------------------------------------------------------- the run
    def setup(self):
        self.log(f"work dir {self.dir}; seed {self.args.seed}; server {self.address}")
        self.pg_start()
        self.log(f"PostgreSQL up: {self.dsn}")
        self.start_server()
        with open(self.admin_token_file) as f:
            self.admin_token = f.read().strip()
        rc, out, err = self.cli(["admin", "tenants", "create", "chaos"], token=self.admin_token)
        if rc != 0:
            raise RuntimeError("cannot create the tenant: " + err)
        rc, out, err = self.cli(["admin", "tokens", "create", "chaos", "--quiet"],
                                token=self.admin_token, json_out=False)
        if rc != 0:
            raise RuntimeError("cannot create the token: " + err)
        self.token = out.strip().splitlines()[-1]
        for name in self.worker_names:
            self.start_worker(name)
        ok, ws = self.wait_workers(idle=True, timeout=120)
        if not ok:
            raise RuntimeError(f"daemons did not all connect: {ws}")
        self.log(f"{len(self.worker_names)} daemons connected and idle")

    def run(self):
        a = self.args
        end = time.time() + a.minutes * 60
        next_fault = time.time() + self.rng.uniform(a.first_fault, a.first_fault + 10)
        last_refresh = 0
        while time.time() < end:
            self.check_processes()
            if time.time() - last_refresh > 3:
                self.refresh_jobs()
                last_refresh = time.time()
            while (self.in_flight() < a.jobs and (a.max_jobs == 0 or self.submitted < a.max_jobs)
                   and time.time() < end):
                if not self.submit_pending():
                    break
            if time.time() >= next_fault:
                self.inject()
                self.refresh_jobs()
                next_fault = time.time() + self.rng.uniform(a.fault_min, a.fault_max)
            time.sleep(0.5)
        self.log(f"stopped injecting after {len(self.faults)} faults; waiting for "
                 f"{self.in_flight()} job(s) to end (at most {a.final_timeout} s)")
        deadline = time.time() + a.final_timeout
        while time.time() < deadline:
            self.check_processes()
            self.refresh_jobs()
            if self.in_flight() == 0:
                break
            time.sleep(2)
        self.log(f"{self.in_flight()} job(s) still not terminal")

    # ---------------------------------------------------------------- invariants and the report
    def verify(self):
        inv = []

        def check(name, ok, detail):
            inv.append({"invariant": name, "ok": bool(ok), "detail": detail})

        self.refresh_jobs()
        jobs = [self.jobs[j] for j in self.job_order]
        not_terminal = [f"{j['last']['id']} {j['last']['state']}" for j in jobs
                        if j["last"]["state"] not in TERMINAL]
        check("every job terminal", not not_terminal,
              f"{len(jobs)} jobs" if not not_terminal else "; ".join(not_terminal))

        bad_failures = []
        for j in jobs:
            last = j["last"]
            if last["state"] == "JOB_STATE_CANCELLED":
                bad_failures.append(f"{last['id']} CANCELLED ({last.get('reason')})")
            if last["state"] == "JOB_STATE_FAILED" and "restarts used)" not in last.get("message", ""):
                bad_failures.append(f"{last['id']} FAILED {last.get('reason')}: "
                                    f"{last.get('message', '')[:300]}")
        check("FAILED only with the restart budget used up", not bad_failures,
              "; ".join(bad_failures) or "none")

        succeeded = [j for j in jobs if j["last"]["state"] == "JOB_STATE_SUCCEEDED"]
        check("at least one job succeeded", succeeded, f"{len(succeeded)} of {len(jobs)}")

        model_problems = []
        for j in succeeded:
            last = j["last"]
            ref = last.get("modelRef", "")
            if not ref:
                model_problems.append(f"{last['id']}: no model_ref")
                continue
            rc, model, err = self.cli(["models", "get", ref])
            if rc != 0:
                model_problems.append(f"{last['id']}: models get {ref}: {err}")
                continue
            sha = model.get("checkpointSha256", "")
            path = os.path.join(self.data_dir, "blobs", sha[:2], sha)
            if not sha or not os.path.isfile(path):
                model_problems.append(f"{ref}: checkpoint blob {path} missing")
                continue
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != sha:
                model_problems.append(f"{ref}: blob sha256 {h.hexdigest()} != {sha}")
            size = int(model.get("checkpointSizeBytes", "0"))
            if size != os.path.getsize(path):
                model_problems.append(f"{ref}: blob size {os.path.getsize(path)} != {size}")
            j["model"] = {"ref": ref, "sha256": sha, "bytes": size}
        check("every SUCCEEDED job's model registered, its checkpoint blob present with its sha256",
              not model_problems, "; ".join(model_problems) or f"{len(succeeded)} models verified")

        ok, ws = self.wait_workers(idle=True, timeout=self.args.idle_timeout)
        leaked = []
        for w in ws or []:
            if w.get("connected") and w.get("freeSlots") != w.get("slots"):
                leaked.append(f"{w['name']} free {w.get('freeSlots')} of {w.get('slots')}")
        check("no slot leaked (every daemon connected, free_slots == slots)", ok and not leaked,
              "; ".join(leaked) or ("all idle" if ok else f"workers: {ws}"))

        deadline = time.time() + 30  # ranks of an ended job get their grace to exit
        ranks = self.our_ranks()
        while ranks and time.time() < deadline:
            time.sleep(1)
            ranks = self.our_ranks()
        check("no rank process left", not ranks,
              "; ".join(f"pid {p} ppid {pp} job {jb} rank {r} attempt {at}"
                        for p, pp, jb, r, at in ranks) or "none")

        for what, title in (("orphan_rank", "no rank outlived its daemon"),
                            ("stale_rank", "no rank of an earlier attempt or ended job kept running"),
                            ("server_exited", "gantry-server never died unless killed"),
                            ("daemon_exited", "daemons never died unless killed")):
            found = [d for w, d in self.violations if w == what]
            check(title, not found, "; ".join(found) or "none")
        requested = [k for k in FAULT_KINDS if k in self.args.faults]
        injected = {f["kind"] for f in self.faults}
        missing = [k for k in requested if k not in injected]
        check("every requested fault kind was injected", not missing,
              "missing: " + ", ".join(missing) if missing else f"{len(self.faults)} faults")
        survived = [f for f in self.faults if f["kind"] == "stop_pg"]
        check("gantry-server survived every PostgreSQL outage",
              all(f.get("server_survived") for f in survived),
              f"{len(survived)} outages")
        return inv

    def timeline(self):
        """Per job: its events; per fault: the time until each affected job ran again."""
        for jid in self.job_order:
            events = self.job_events(jid)
            j = self.jobs[jid]
            j["running_times"] = [parse_ts(e["time"]) for e in events
                                  if e.get("stateChange", {}).get("to") == "JOB_STATE_RUNNING"]
            j["restart_events"] = [{"t": round(parse_ts(e["time"]) - self.t0, 1),
                                    "reason": e["restart"].get("reason"),
                                    "attempt": e["restart"].get("attempt"),
                                    "counted": e["restart"].get("counted"),
                                    "resumed_from_step": int(e["restart"].get("resumedFromStep", 0)),
                                    "message": e["restart"].get("message", "")[:200]}
                                   for e in events if "restart" in e]
            j["events"] = len(events)
        # Each restart is put down to the latest fault before it (faults never overlap); the time
        # from that fault to the job's next RUNNING is the recovery time of the fault for the job.
        for f in self.faults:
            f["back_to_running_seconds"] = {}
            f["restarts_caused"] = {}
        for jid in self.job_order:
            j = self.jobs[jid]
            for r in j["restart_events"]:
                before = [f for f in self.faults if f["t"] <= r["t"] + 0.5]
                if not before:
                    continue
                f = before[-1]
                r["fault"] = f"{f['kind']}@{f['t']}"
                f["restarts_caused"].setdefault(jid, []).append(r["reason"])
                rt = r["t"] + self.t0
                after = [t for t in j["running_times"] if t > rt]
                if after and jid not in f["back_to_running_seconds"]:
                    f["back_to_running_seconds"][jid] = round(after[0] - f["time"], 1)

    def report(self, invariants, error):
        jobs = []
        for jid in self.job_order:
            j = self.jobs[jid]
            last = j["last"]
            jobs.append({"id": jid, "index": j["index"], "world_size": j["spec"]["worldSize"],
                         "epochs": j["spec"]["hyperParameters"]["epochs"],
                         "state": last["state"], "reason": last.get("reason"),
                         "message": last.get("message", "")[:300],
                         "restarts": last.get("restarts", 0), "attempt": last.get("attempt", 0),
                         "model_ref": last.get("modelRef", ""), "model": j.get("model"),
                         "restart_events": j.get("restart_events", []),
                         "seconds": round((parse_ts(last.get("finishedAt")) or time.time())
                                          - j["submitted"], 1)})
        counts = {k: sum(1 for f in self.faults if f["kind"] == k) for k in FAULT_KINDS}
        states = {}
        for job in jobs:
            states[job["state"]] = states.get(job["state"], 0) + 1
        back = [s for f in self.faults for s in f.get("back_to_running_seconds", {}).values()]
        by_kind = {}
        for f in self.faults:
            by_kind.setdefault(f["kind"], []).extend(f.get("back_to_running_seconds", {}).values())
        restarts_by_reason = {}
        for job in jobs:
            for r in job["restart_events"]:
                restarts_by_reason[r["reason"]] = restarts_by_reason.get(r["reason"], 0) + 1
        rep = {
            "seed": self.args.seed, "minutes": self.args.minutes, "workers": self.args.workers,
            "jobs_in_flight": self.args.jobs, "max_jobs": self.args.max_jobs,
            "checkpoint_every_steps": self.args.checkpoint_every_steps,
            "checkpoint_every_epochs": self.args.checkpoint_every_epochs,
            "max_restarts": self.args.max_restarts,
            "duration_seconds": round(time.time() - self.t0, 1),
            "faults_by_kind": counts, "faults": [{k: v for k, v in f.items() if k != "time"}
                                                 for f in self.faults],
            "jobs_by_state": states,
            "restarts_total": sum(j["restarts"] for j in jobs),
            "attempts_total": sum(j["attempt"] for j in jobs),
            "fault_to_running_seconds": {
                "n": len(back), "min": min(back) if back else None,
                "median": sorted(back)[len(back) // 2] if back else None,
                "max": max(back) if back else None},
            "fault_to_running_seconds_by_kind": {
                k: {"n": len(v), "median": sorted(v)[len(v) // 2], "max": max(v)}
                for k, v in by_kind.items() if v},
            "restarts_by_reason": restarts_by_reason,
            "jobs": jobs, "invariants": invariants, "error": error,
            "ok": error is None and bool(invariants) and all(i["ok"] for i in invariants),
            "work_dir": self.dir,
        }
        return rep


def print_table(rows, headers):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def print_report(rep):
    print("\n== faults")
    print_table([(f["t"], f["kind"], f.get("target", ""), ",".join(j[:12] for j in f.get("jobs", [])),
                  f.get("down_seconds", ""),
                  " ".join(f"{v}s" for v in f.get("back_to_running_seconds", {}).values()),
                  " ".join(",".join(v) for v in f.get("restarts_caused", {}).values() if v))
                 for f in rep["faults"]],
                ["T+S", "KIND", "TARGET", "JOBS", "DOWN_S", "TO_RUNNING", "RESTARTS"])
    print("\n== jobs")
    print_table([(j["id"], j["world_size"], j["epochs"], j["state"], j["reason"], j["restarts"],
                  j["attempt"], j["model_ref"], j["seconds"]) for j in rep["jobs"]],
                ["JOB", "WS", "EP", "STATE", "REASON", "RESTARTS", "ATTEMPT", "MODEL", "SECONDS"])
    print("\n== summary")
    print(f"faults {rep['faults_by_kind']}; jobs {rep['jobs_by_state']}; restarts "
          f"{rep['restarts_total']} (attempts {rep['attempts_total']}); fault -> RUNNING again "
          f"{rep['fault_to_running_seconds']}; {rep['duration_seconds']} s")
    print(f"restarts by reason {rep['restarts_by_reason']}; fault -> RUNNING by kind "
          f"{rep['fault_to_running_seconds_by_kind']}")
    print("\n== invariants")
    print_table([("PASS" if i["ok"] else "FAIL", i["invariant"], i["detail"][:160])
                 for i in rep["invariants"]], ["", "INVARIANT", "DETAIL"])
    if rep["error"]:
        print(f"\nERROR: {rep['error']}")
    print(f"\nchaos soak: {'OK' if rep['ok'] else 'FAILED'} (logs in {rep['work_dir']})")


def cleanup(soak):
    """Stops everything the soak started; never raises."""
    if soak is None:
        return
    for name, p in soak.workers.items():
        if p is not None and p.poll() is None:
            p.terminate()
    for name, p in soak.workers.items():
        if p is not None:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    for pid, _, _, _, _ in soak.our_ranks():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if soak.server is not None and soak.server.poll() is None:
        soak.server.terminate()
        try:
            soak.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            soak.server.kill()
            soak.server.wait()
    try:
        soak.pg("stop")
    except Exception as e:  # noqa: BLE001
        print(f"soak: stopping PostgreSQL: {e}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True, help="how long faults are injected")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=3, help="jobs kept in flight")
    ap.add_argument("--max-jobs", type=int, default=0, help="jobs submitted at most (0 = no limit)")
    ap.add_argument("--workers", type=int, default=3, help="gantry-worker daemons (one slot each)")
    ap.add_argument("--report", help="write the JSON report here")
    ap.add_argument("--build-dir", default=os.environ.get("GANTRY_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    ap.add_argument("--work-dir", help="keep everything here (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--port", type=int, default=0, help="gantry-server port (default: a free one)")
    ap.add_argument("--port-base", type=int, default=33000,
                    help="rendezvous ports: daemon i gets BASE+40i .. BASE+40i+30")
    ap.add_argument("--faults", default=",".join(FAULT_KINDS),
                    help="fault kinds, comma-separated: " + ",".join(FAULT_KINDS))
    ap.add_argument("--fault-min", type=float, default=20, help="seconds between faults, at least")
    ap.add_argument("--fault-max", type=float, default=45, help="seconds between faults, at most")
    ap.add_argument("--first-fault", type=float, default=20,
                    help="the first fault comes 0-10 s after this many seconds")
    ap.add_argument("--server-down", default="1,5",
                    help="seconds gantry-server stays down after a kill -9: MIN,MAX")
    ap.add_argument("--daemon-down", default="2,6",
                    help="seconds a killed daemon stays down: MIN,MAX")
    ap.add_argument("--pg-down", default="5,20", help="seconds PostgreSQL stays stopped: MIN,MAX")
    ap.add_argument("--stale-grace", type=float, default=45,
                    help="seconds a rank of an earlier attempt or of an ended job may run on")
    ap.add_argument("--events", type=int, default=80, help="toy Monte Carlo events per dataset")
    ap.add_argument("--epochs", default="2,3", help="epochs of a job, drawn from this list")
    ap.add_argument("--max-restarts", type=int, default=30)
    ap.add_argument("--checkpoint-every-steps", type=int, default=0,
                    help="intermediate checkpoints (0 = only the final one); needs the worker-side "
                         "resume")
    ap.add_argument("--checkpoint-every-epochs", type=int, default=0)
    ap.add_argument("--final-timeout", type=float, default=900,
                    help="seconds the jobs get to end after the faults stop")
    ap.add_argument("--idle-timeout", type=float, default=90,
                    help="seconds the daemons get to report every slot free at the end")
    ap.add_argument("--orphan-grace", type=float, default=15,
                    help="seconds a rank may outlive its daemon before it counts as left over")
    args = ap.parse_args()
    args.epochs = [int(e) for e in args.epochs.split(",")]
    for name in ("server_down", "daemon_down", "pg_down"):
        lo, hi = (float(x) for x in getattr(args, name).split(","))
        setattr(args, name, (lo, hi))
    args.faults = [k for k in args.faults.split(",") if k]
    for k in args.faults:
        if k not in FAULT_KINDS:
            ap.error(f"unknown fault kind {k}")

    soak = None
    error = None
    invariants = []
    rep = None

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        soak = Soak(args)
        soak.setup()
        soak.run()
        invariants = soak.verify()
        soak.timeline()
    except BaseException as e:  # noqa: BLE001  report whatever happened, then clean up
        error = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        if soak is not None:
            try:
                rep = soak.report(invariants, error)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                rep = {"ok": False, "error": f"{error}; report: {e}"}
        cleanup(soak)
    if rep is None:
        print(f"chaos soak: FAILED before it started: {error}")
        return 1
    if "jobs" in rep:
        print_report(rep)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(rep, f, indent=2)
        print(f"report written to {args.report}")
    if soak is not None and not args.keep and not args.work_dir and rep.get("ok"):
        shutil.rmtree(soak.dir, ignore_errors=True)
    elif soak is not None:
        print(f"kept {soak.dir}")
    return 0 if rep.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
