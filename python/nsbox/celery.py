"""nsbox behind a Celery queue: one worker per host, the queue spreads the work.

    # on each host (the policy there is the ceiling for every task):
    NSBOX_CELERY_BROKER=redis://queue:6379/0 NSBOX_CELERY_POLICY=/etc/nsbox/worker.yaml \\
        celery -A nsbox.celery worker -n w1@%h

    # anywhere:
    from nsbox.celery import run_code
    run_code.delay("print(6*7)", language="python").get()["stdout"]     # '42\\n'

    # with a timeout, and a precise error when the task is lost:
    from nsbox.celery import submit, result
    result(submit(run_code, "print(6*7)", idempotency_key="job-17"), timeout=60)

Tasks `nsbox.run_code(code, language="python", **kw)` and `nsbox.run(argv, **kw)`
return the `--json` record (a dict) plus `worker` (the Celery node name),
`host`, `queue_wait_ms`, `started_at`/`finished_at` (epoch seconds),
`failed_on` (the workers where setup failed before), `idempotency_key`,
`redelivered` and `executed_once`. Arguments come from the queue and are
hostile: only `stdin`, `env`, `idempotency_key` and lower `timeout`, `memory`,
`cpus`, `pids`, `max_output` than the worker's configuration are accepted;
anything else raises `Refused` (never retried). A failure of nsbox itself
(nothing ran) is retried on another worker; a failure of the code is a result.

Each task's code runs at most once per idempotency key (the task id unless the
caller gives one): a durable ledger (celery_ledger.py) records "started" before
the code runs and the finished record before the message is acknowledged; a
delivery that finds the record returns it (`redelivered: true,
executed_once: true`), one that finds a run that died raises `TaskLost`.
Messages a dead worker had prefetched come back within seconds
(celery_redeliver.py). See docs/scale.md.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import sys
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Tuple

from celery import Celery, bootsteps, signals

from .celery_ledger import BEAT, KEY as _KEY, Ledger, StoreUnavailable
from .celery_client import TaskLost, TaskTimeout, when as _when
from .celery_redeliver import Redeliverer, keep_failed_moves
from .errors import SandboxError
from .host import check
from .result import Result
from .sandbox import LANGUAGES, Sandbox

__all__ = ["app", "run_code", "run", "Refused", "TaskLost", "TaskTimeout", "submit", "result", "results",
           "worker_sandbox", "ceiling"]

log = logging.getLogger("nsbox.celery")
env = os.environ
BROKER = env.get("NSBOX_CELERY_BROKER", "redis://127.0.0.1:6379/0")
BACKEND = env.get("NSBOX_CELERY_BACKEND", BROKER)
QUEUE = env.get("NSBOX_CELERY_QUEUE", "nsbox")


def _int_env(name: str, default: int, low: int, high: int) -> int:
    v = env.get(name)
    if v is None or v == "":
        return default
    if not re.fullmatch(r"[0-9]{1,9}", v) or not low <= int(v) <= high:
        raise SystemExit("nsbox.celery: %s must be a whole number from %d to %d, got %r" % (name, low, high, v))
    return int(v)


CONCURRENCY = _int_env("NSBOX_CELERY_CONCURRENCY", os.cpu_count() or 1, 1, 4096)
MAX_RETRIES = _int_env("NSBOX_CELERY_MAX_RETRIES", 3, 0, 100)
# Messages a pool process reserves ahead (Celery's prefetch multiplier). With
# 1, Redis leaves a worker idle between tasks until its event loop's next
# timer (measured: stalls of up to 3 s); 4 keeps it busy. Reserved messages
# wait on that worker (another may be idle) and count against the
# visibility timeout: it must exceed PREFETCH x the longest task.
PREFETCH = _int_env("NSBOX_CELERY_PREFETCH", 4, 1, 1000)
# A retry waits this long (seconds) before another worker may take it: a
# worker that is alone does not spin through its retries.
HOP_DELAY = 0.5
# Redis redelivers a message that was not acknowledged within this time: it
# must exceed the longest task, or a slow task runs twice at once.
VISIBILITY = _int_env("NSBOX_CELERY_VISIBILITY_TIMEOUT", 3600, 1, 10 ** 7)
# A worker whose heartbeat stood still this long (seconds, by the watcher's
# clock) is gone: the messages it had prefetched and never started go back on
# the queue. Too short costs a duplicate delivery, never a second run.
WORKER_LEASE = _int_env("NSBOX_CELERY_WORKER_LEASE", 3, 1, 3600)
# A started run whose heartbeat stood still this long is lost: its task ends
# in TaskLost, and it is not run again. Its heartbeat is a thread of the pool
# process running it, so this must exceed that process's longest stall.
RUN_LEASE = _int_env("NSBOX_CELERY_RUN_LEASE", 20, 2, 86400)
# How long (seconds) a task must be missing from both the broker and the
# ledger before a client declares the broker lost it: a worker holding it
# while its connection is down puts it back when it reconnects.
LOST_AFTER = _int_env("NSBOX_CELERY_LOST_AFTER", 10, 1, 86400)
# How long ledger entries (and Celery's results) are kept, in seconds.
RECORD_TTL = _int_env("NSBOX_CELERY_RECORD_TTL", 86400, 60, 10 ** 8)
# How long a worker waits for the ledger's Redis (a restart) before giving
# up on storing a record.
STORE_WAIT = _int_env("NSBOX_CELERY_STORE_WAIT", 120, 1, 86400)

app = Celery("nsbox", broker=BROKER, backend=BACKEND)
app.conf.update(
    # JSON only: a pickled message would run code in the worker itself.
    task_serializer="json", result_serializer="json", accept_content=["json"],
    result_accept_content=["json"],
    task_default_queue=QUEUE,
    # Acknowledged when done: a worker that dies mid-task leaves the message
    # to be delivered again to another one (at least once).
    task_acks_late=True, task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=PREFETCH,
    worker_concurrency=CONCURRENCY,
    # Prefork (Celery's default): one sandbox per pool process at a time, so
    # the pool's size is the cap; its processes die with the worker
    # (PR_SET_PDEATHSIG), and nsbox's janitor removes what their sandboxes
    # left. (The threads pool would take the next message only at the event
    # loop's next timer with Redis: seconds idle between tasks.)
    broker_transport_options={"visibility_timeout": VISIBILITY},
    result_backend_transport_options={"visibility_timeout": VISIBILITY},
    task_track_started=False,
    worker_hijack_root_logger=False,
    result_expires=RECORD_TTL,
    # A task sent while the broker is away fails at once, not after minutes.
    task_publish_retry_policy={"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5,
                               "interval_max": 1},
)


_ledger_obj: Optional[Ledger] = None


def ledger() -> Ledger:
    """The ledger on the result backend's Redis (one per process)."""
    global _ledger_obj
    if _ledger_obj is None:
        _ledger_obj = Ledger(BACKEND, RECORD_TTL, STORE_WAIT)
    return _ledger_obj


def key_of(task_id: str, given: Optional[str]) -> str:
    """The ledger key of a task: the idempotency key given, else the task id."""
    return given if isinstance(given, str) and _KEY.fullmatch(given) else task_id


class Refused(ValueError):
    """The task's arguments are not acceptable on this worker (never retried)."""


# ---- the worker's sandbox: its configuration is the ceiling --------------------

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DUR = {"": 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def _size(text: str) -> Optional[int]:
    m = re.fullmatch(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([bkmgt]?)(?:i?b)?", text.strip().lower())
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _seconds(text: str) -> Optional[float]:
    m = re.fullmatch(r"([0-9]{1,12}(?:\.[0-9]{1,6})?)(ms|s|m|h|)", text.strip())
    return float(m.group(1)) * _DUR[m.group(2)] if m else None


def ceiling(sb: Sandbox) -> Dict[str, Optional[float]]:
    """The worker's limits (memory and output in bytes, timeout in seconds,
    cpus, pids) read from its effective configuration; None where unlimited
    or unreadable (then a task may not set that limit at all)."""
    limits: Dict[str, str] = {}
    inside = False
    for line in sb.config_yaml().splitlines():
        if not line.startswith(" "):
            inside = line.strip() == "limits:"
            continue
        m = re.fullmatch(r"  ([a-z_]+): (.*)", line)
        if inside and m:
            limits[m.group(1)] = m.group(2).strip().strip('"')
    conv = {"memory": _size, "output": _size, "timeout": _seconds,
            "cpus": lambda s: float(s) if re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", s) else None,
            "pids": lambda s: int(s) if re.fullmatch(r"[0-9]{1,9}", s) else None}
    out: Dict[str, Optional[float]] = {}
    for key, f in conv.items():
        v = f(limits.get(key, ""))
        out[key] = v if v else None      # 0: unlimited, no ceiling to compare with
    return out


_sb: Optional[Sandbox] = None
_ceiling: Dict[str, Optional[float]] = {}


def worker_sandbox() -> Sandbox:
    """The worker's sandbox configuration: NSBOX_CELERY_POLICY (else NSBOX_POLICY),
    the NSBOX_* variables `nsbox run` reads, and NSBOX_CELERY_IMAGE."""
    global _sb, _ceiling
    if _sb is None:
        kw: Dict[str, Any] = {}
        if env.get("NSBOX_CELERY_POLICY"):
            kw["policy"] = env["NSBOX_CELERY_POLICY"]
        if env.get("NSBOX_CELERY_IMAGE"):
            kw["image"] = env["NSBOX_CELERY_IMAGE"]
        sb = Sandbox.from_env(**kw)
        _ceiling = ceiling(sb)
        _sb = sb
    return _sb


# ---- hostile arguments -----------------------------------------------------------

MAX_CODE = 1 << 20
MAX_STDIN = 1 << 20
MAX_ARGV = 64 << 10
MAX_ENV = 64
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_LIMITS = {"timeout": ("timeout", _seconds), "memory": ("memory", _size), "max_output": ("output", _size),
           "cpus": ("cpus", None), "pids": ("pids", None)}


def _text(name: str, v: Any, limit: int) -> str:
    if not isinstance(v, str):
        raise Refused("%s: expected a string, got %s" % (name, type(v).__name__))
    if len(v.encode("utf-8", "surrogatepass")) > limit:
        raise Refused("%s: longer than %d bytes" % (name, limit))
    return v


def _lower(name: str, v: Any) -> Any:
    """A limit a task may give: a positive number (or the CLI's text) at or
    below the worker's own; returned as a number nsbox reads the same way."""
    key, parse = _LIMITS[name]
    top = _ceiling.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise Refused("%s: expected a number, got %s" % (name, type(v).__name__))
    if isinstance(v, str):
        n = parse(v) if parse else None
        if n is None:
            raise Refused("%s: not a number or size this worker reads: %.40r" % (name, v))
    else:
        n = v
    if not (isinstance(n, (int, float)) and math.isfinite(n) and n > 0):
        raise Refused("%s: must be a positive finite number" % name)
    if top is None:
        raise Refused("refused %s: this worker's configuration sets no %s limit to lower" % (name, key))
    if n > top:
        raise Refused("refused %s %g: the worker's limit is %g and a task may only lower it" % (name, n, top))
    if name == "pids":
        if n != int(n):
            raise Refused("pids: expected a whole number")
        return int(n)
    if name in ("memory", "max_output"):
        return max(int(n), 1)
    return float(n)


def _options(kw: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any], List[str], Optional[str]]:
    """The task's keywords checked against a closed list: (sandbox keywords,
    run keywords, workers where setup failed before, idempotency key)."""
    sb: Dict[str, Any] = {}
    rk: Dict[str, Any] = {}
    failed: List[str] = []
    ikey: Optional[str] = None
    for k, v in kw.items():
        if k in ("memory", "cpus", "pids", "max_output"):
            sb[k] = _lower(k, v)
        elif k == "timeout":
            rk[k] = _lower(k, v)
        elif k == "stdin":
            if v is not None:
                rk[k] = _text("stdin", v, MAX_STDIN)
        elif k == "env":
            if not isinstance(v, dict) or len(v) > MAX_ENV:
                raise Refused("env: expected an object of at most %d strings" % MAX_ENV)
            for n, val in v.items():
                if not isinstance(n, str) or not _ENV_NAME.fullmatch(n):
                    raise Refused("env: invalid variable name %.40r" % (n,))
                if "\0" in _text("env." + n, val, 4096):
                    raise Refused("env.%s: contains a NUL byte" % n)
            sb[k] = dict(v)
        elif k == "_failed_on":
            if not isinstance(v, list) or len(v) > 64 or not all(isinstance(x, str) and len(x) <= 255 for x in v):
                raise Refused("_failed_on: expected a list of worker names")
            failed = list(v)
        elif k == "idempotency_key":
            if not isinstance(v, str) or not _KEY.fullmatch(v):
                raise Refused("idempotency_key: expected 1 to 200 characters of [A-Za-z0-9._:@/+=-], "
                              "not starting with a punctuation mark")
            ikey = v
        else:
            raise Refused("refused argument %.64r: the worker's configuration is the ceiling; a task may give "
                          "stdin, env, idempotency_key and lower timeout, memory, cpus, pids, max_output (no "
                          "image, rootfs, policy, network, volume, workspace, user, seccomp or settings)" % (k,))
    return sb, rk, failed, ikey


# ---- the tasks -------------------------------------------------------------------

@signals.before_task_publish.connect
def _stamp(headers: Optional[Dict[str, Any]] = None, **_: Any) -> None:
    # When it entered the queue (this publish: a retry is stamped again).
    if headers is not None:
        headers["nsbox_sent"] = time.time()


def _sent(request: Any) -> Optional[float]:
    v = getattr(request, "nsbox_sent", None)
    if v is None and isinstance(getattr(request, "headers", None), dict):
        v = request.headers.get("nsbox_sent")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _answer_existing(task: Any, key: str, entry: Dict[str, str], node: str) -> Dict[str, Any]:
    """A delivery whose key another delivery already took: its stored record,
    or TaskLost. While that run goes on (its heartbeat moves), wait for it."""
    lg = ledger()
    while entry.get("state") == "started":
        moving = lg.watch(BEAT + key, RUN_LEASE, until=lambda: lg.get(key).get("state") != "started")
        entry = lg.get(key)
        if entry.get("state") == "started" and not moving:
            why = ("task %s (key %s) started on %s at %s and its run stopped beating for %d s before it "
                   "finished (its worker was killed or lost); it may have partly run and is not run again"
                   % (task.request.id, key, entry.get("worker"), _when(entry.get("started_at")), RUN_LEASE))
            if lg.lose(key, entry.get("token", ""), why):
                raise TaskLost(why, task.request.id, key)
            entry = lg.get(key)
    if entry.get("state") == "finished":
        rec = json.loads(entry["record"])
        rec.update(redelivered=True, executed_once=True, answered_by=node)
        if entry.get("task_id") != task.request.id:
            rec["duplicate_of"] = entry.get("task_id")
        return rec
    if entry.get("state") == "lost":
        raise TaskLost(entry.get("reason") or "task %s (key %s) is lost" % (task.request.id, key),
                       task.request.id, key)
    raise TaskLost("task %s (key %s): its ledger entry vanished (the ledger's Redis lost data?); not run "
                   "again" % (task.request.id, key), task.request.id, key)


def _execute(task: Any, kind: str, what: Any, language: str, kw: Dict[str, Any]) -> Dict[str, Any]:
    base = worker_sandbox()
    sbkw, runkw, failed, ikey = _options(kw)
    node = task.request.hostname or socket.gethostname()
    key = ikey or task.request.id
    if node in failed:
        # Setup failed here before: pass it on to another worker.
        if task.request.retries >= MAX_RETRIES:
            raise SandboxError("setup", 0, "setup failed on %s; no retries left" % ", ".join(failed))
        raise task.retry(kwargs=dict(kw), countdown=HOP_DELAY, max_retries=MAX_RETRIES)
    received = time.time()
    sent = _sent(task.request)
    redelivered = bool((task.request.delivery_info or {}).get("redelivered"))
    # "started", durably, before the code runs: one run per key, whatever
    # the deliveries. (A claim retried over a reconnect that did land is ours.)
    lg = ledger()
    token = uuid.uuid4().hex
    if not lg.claim(key, token, task.request.id, node):
        entry = lg.get(key)
        if entry.get("token") != token:
            return _answer_existing(task, key, entry, node)
    started = time.time()
    try:
        with lg.heartbeat(key, max(0.2, min(2.0, RUN_LEASE / 5))):
            sb = Sandbox(policy=base.policy, _base=base._settings, **sbkw) if sbkw else base
            r = sb.run_code(what, language, **runkw) if kind == "code" else sb.run(what, **runkw)
    except SandboxError as e:
        if e.step == "import_gate" and e.record is not None:
            # The policy's answer (the import gate refused the code), the
            # same record every door gives: a result, never retried, kept
            # in the ledger like any other.
            r = Result(e.record)
        else:
            # Nothing ran: the key is free again.
            lg.release(key, token)
            if e.step in ("config", "policy"):
                raise Refused("not accepted by nsbox: %s" % e.message) from None
            # Another worker may manage.
            if task.request.retries >= MAX_RETRIES:
                raise
            kw = dict(kw, _failed_on=failed + [node])
            raise task.retry(kwargs=kw, exc=e, countdown=HOP_DELAY, max_retries=MAX_RETRIES)
    except BaseException as e:
        # Interrupted mid-run (the worker's shutdown): the code may have
        # partly run, so the key is not freed for another run.
        lg.lose(key, token, "task %s (key %s) was interrupted on %s while it ran (%s); it may have partly run "
                "and is not run again" % (task.request.id, key, node, type(e).__name__))
        raise
    finished = time.time()
    # Fields around the SDK's record (which it alone writes): where and when,
    # and what the ledger guarantees about this run.
    rec = dict(r.record)
    rec.update(worker=node, host=socket.gethostname(), started_at=started, finished_at=finished,
               queue_wait_ms=round(((received if sent is None else started) - (sent or received)) * 1000, 3),
               delivered_at=received, failed_on=failed, idempotency_key=key, redelivered=redelivered,
               executed_once=True)
    # Durably, before Celery acknowledges the message.
    try:
        stored = lg.finish(key, token, rec, task.request.id, node)
    except StoreUnavailable as e:
        log.error("nsbox.celery: task %s (key %s) ran, but its record could not be stored: %s",
                  task.request.id, key, e)
        raise
    if not stored:
        # A watcher declared this run lost while it ran (its heartbeat
        # stalled past RUN_LEASE): the ledger keeps its verdict.
        entry = lg.get(key)
        log.error("nsbox.celery: task %s (key %s) finished after it was declared lost: %s",
                  task.request.id, key, entry.get("reason"))
        raise TaskLost(entry.get("reason") or "task %s (key %s) finished on %s after it was declared lost"
                       % (task.request.id, key, node), task.request.id, key)
    if stored == 2:
        log.warning("nsbox.celery: task %s (key %s): its ledger entry had vanished while it ran (Redis lost "
                    "data); its record is stored anew", task.request.id, key)
    return rec


@app.task(name="nsbox.run_code", bind=True, resultrepr_maxsize=160)
def run_code(self: Any, code: Any, language: Any = "python", **kw: Any) -> Dict[str, Any]:
    """Run a snippet as `nsbox run-code --json` does, on whichever worker takes it."""
    _text("code", code, MAX_CODE)
    if not isinstance(language, str) or language not in LANGUAGES:
        raise Refused("language: expected one of %s" % ", ".join(sorted(LANGUAGES)))
    return _execute(self, "code", code, language, kw)


@app.task(name="nsbox.run", bind=True, resultrepr_maxsize=160)
def run(self: Any, argv: Any, **kw: Any) -> Dict[str, Any]:
    """Run a command (a list of strings, or a string for /bin/sh -c) as `nsbox run --json` does."""
    if isinstance(argv, str):
        _text("argv", argv, MAX_ARGV)
    elif isinstance(argv, list) and argv and len(argv) <= 4096:
        total = sum(len(_text("argv[]", a, MAX_ARGV).encode("utf-8", "surrogatepass")) + 1 for a in argv)
        if total > MAX_ARGV:
            raise Refused("argv: longer than %d bytes" % MAX_ARGV)
    else:
        raise Refused("argv: expected a string or a non-empty list of at most 4096 strings")
    if any("\0" in a for a in ([argv] if isinstance(argv, str) else argv)):
        raise Refused("argv: contains a NUL byte")
    return _execute(self, "run", argv, "", kw)


# ---- the worker refuses to start where a run cannot work --------------------------

def preflight() -> Optional[str]:
    """Why this host cannot run the worker's sandboxes, or None. `nsbox check`'s
    required items (the default image only when the worker uses it), then a
    run of `true` in the worker's configuration."""
    try:
        sb = worker_sandbox()
    except (SandboxError, TypeError, ValueError) as e:
        return "the worker's configuration is invalid: %s" % e
    report = check()
    own_image = any(k in ("image", "rootfs") for k, _, _ in sb._settings) or bool(sb.policy)
    bad = [i for i in report.get("items", []) if i.get("required") and i.get("status") != "ok"
           and not (own_image and i.get("name") == "default image")]
    if bad:
        return "; ".join("%s: %s%s" % (i.get("name"), i.get("detail"),
                                       " (remedy: %s)" % i["remedy"] if i.get("remedy") else "") for i in bad)
    try:
        r = sb.run(["true"], timeout=30)
    except SandboxError as e:
        return "a run of 'true' in the worker's sandbox failed: %s" % e
    if not r.ok:
        return "a run of 'true' in the worker's sandbox did not succeed: %s" % (r.status,)
    return None


@signals.worker_init.connect
def _refuse_to_start(sender: Any = None, **_: Any) -> None:
    why = preflight()
    n = getattr(sender, "concurrency", None)
    pool = getattr(sender, "pool_cls", "prefork")
    pool = pool if isinstance(pool, str) else getattr(pool, "__module__", "?")
    if not why and isinstance(n, int) and n > CONCURRENCY:
        why = "concurrency %d is above NSBOX_CELERY_CONCURRENCY=%d, the cap of sandboxes at once" % (n, CONCURRENCY)
    if not why and "prefork" not in pool:
        why = "only the prefork pool keeps the cap (one sandbox per pool process), not %s" % pool
    if why:
        sys.stderr.write("nsbox.celery: this worker cannot run sandboxes here, not starting: %s\n" % why)
        sys.stderr.flush()
        os._exit(78)     # EX_CONFIG; before any message is taken


# ---- fast redelivery (the worker's main process) -----------------------------------

_redeliverer: Optional[Redeliverer] = None


@signals.task_received.connect
def _note_held(request: Any = None, **_: Any) -> None:
    if _redeliverer is not None and request is not None:
        kw = request.kwargs if isinstance(request.kwargs, dict) else {}
        given = kw.get("idempotency_key")
        _redeliverer.held(request.message.delivery_tag, request.id, given if isinstance(given, str) else None,
                          request)


class _Redelivery(bootsteps.StartStopStep):
    """Runs at every start of the worker's consumer: the first, and each one
    after a lost broker connection (when Celery drops what it had reserved)."""
    requires = {"celery.worker.consumer.tasks:Tasks"}

    def start(self, c: Any) -> None:
        global _redeliverer
        if _redeliverer is None:
            keep_failed_moves()
            _redeliverer = Redeliverer(app, c.hostname, ledger(), BROKER, WORKER_LEASE, key_of)
            _redeliverer.start()
        _redeliverer.restore_own()

    def shutdown(self, c: Any) -> None:
        if _redeliverer is not None:
            _redeliverer.stop()


app.steps["consumer"].add(_Redelivery)


from .celery_client import result, results, submit  # noqa: E402  (the client's side)
