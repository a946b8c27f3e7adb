"""nsbox.celery, the client's side: waiting with a timeout, and a precise
answer when a task will never have a record (imported by nsbox.celery).

    from nsbox.celery import run_code, submit, result, results, TaskLost
    t = submit(run_code, "print(1)", language="python", idempotency_key="job-17")
    rec = result(t, timeout=60)          # the record, or TaskLost / TaskTimeout
"""
from __future__ import annotations

import json
import time
from typing import Any, Dict, Optional, Tuple

from .celery_ledger import BEAT, KEY, StoreUnavailable
from .celery_redeliver import UNACKED, message_ids

__all__ = ["TaskLost", "TaskTimeout", "submit", "result", "results"]


class TaskLost(RuntimeError):
    """A task that will never produce a record: its run started and died
    (its worker was killed, its node lost), or the broker lost its message
    before any worker started it. It is never run again under this
    idempotency key. `task_id`, `key` and the message say which and why."""

    def __init__(self, message: str, task_id: Optional[str] = None, key: Optional[str] = None) -> None:
        super().__init__(message, task_id, key)
        self.message, self.task_id, self.key = message, task_id, key

    def __str__(self) -> str:
        return self.message


class TaskTimeout(TimeoutError):
    """The client's timeout passed while the task is still on its way (queued,
    reserved by a worker, or running): it may still finish."""

    def __init__(self, message: str, task_id: Optional[str] = None, key: Optional[str] = None) -> None:
        super().__init__(message, task_id, key)
        self.message, self.task_id, self.key = message, task_id, key

    def __str__(self) -> str:
        return self.message


def when(t: Any) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(t)))
    except (TypeError, ValueError):
        return "?"


def submit(task: Any, *args: Any, idempotency_key: Optional[str] = None, **kw: Any) -> Any:
    """`task.apply_async(args, kw)` with an idempotency key (the task id when
    None): submitting the same key again returns the first run's record."""
    if idempotency_key is not None:
        if not KEY.fullmatch(idempotency_key):
            raise ValueError("idempotency_key: expected 1 to 200 characters of [A-Za-z0-9._:@/+=-]")
        kw["idempotency_key"] = idempotency_key
    res = task.apply_async(args, kw)
    res.nsbox_key = idempotency_key or res.id
    return res


def result(task: Any, timeout: float) -> Dict[str, Any]:
    """The task's record within `timeout` seconds; raises TaskLost (it will
    never have one), TaskTimeout (still on its way), or the task's own
    failure (Refused, SandboxError)."""
    out = results([task], timeout)[task.id]
    if isinstance(out, BaseException):
        raise out
    return out


def _held_ids(r: Any) -> Optional[set]:
    """Task ids of the messages the broker holds: queued or delivered and not
    acknowledged. None when the broker cannot be read."""
    from . import celery as c
    try:
        queued = r.lrange(c.QUEUE, 0, -1)
        unacked = r.hvals(UNACKED)
    except Exception:
        return None
    ids = set()
    for m in queued:
        try:
            ids.add(json.loads(m)["headers"]["id"])
        except (ValueError, KeyError, TypeError):
            pass
    for m in unacked:
        got = message_ids(m)
        if got:
            ids.add(got[0])
    return ids


def results(tasks: Any, timeout: float) -> Dict[str, Any]:
    """Wait for many tasks at once, at most `timeout` seconds in all: task id
    -> its record, or the exception that stands for it (TaskLost, TaskTimeout,
    the task's own failure). A task is lost when its run died (its heartbeat
    stood still for NSBOX_CELERY_RUN_LEASE) or when, for NSBOX_CELERY_LOST_AFTER
    seconds, no run had started it and the broker held no message of it (a
    broker that lost data): the ledger then marks it lost, so that no later
    delivery runs it."""
    import redis as _redis
    from . import celery as c
    lg = c.ledger()
    broker = _redis.Redis.from_url(c.BROKER, socket_timeout=5, socket_connect_timeout=2)
    pending = {t.id: getattr(t, "nsbox_key", None) or t.id for t in tasks}
    out: Dict[str, Any] = {}
    beats: Dict[str, Tuple[Any, float]] = {}
    absent: Dict[str, float] = {}
    end = time.monotonic() + timeout
    next_scan = 0.0
    entries: Dict[str, Dict[str, str]] = {}
    while pending:
        now = time.monotonic()
        try:
            entries = lg.get_many(pending.values(), wait=0)
            metas = _metas(c.app, pending)
        except (StoreUnavailable, _redis.exceptions.RedisError, OSError):
            entries, metas = {}, {}
        for tid in list(pending):
            key = pending[tid]
            e, m = entries.get(key) or {}, metas.get(tid)
            if e.get("state") == "finished":
                out[tid] = json.loads(e["record"])
            elif e.get("state") == "lost":
                out[tid] = TaskLost(e.get("reason") or "lost", tid, key)
            elif m is not None and m.get("status") in ("SUCCESS", "FAILURE"):
                out[tid] = m["result"]
            elif e.get("state") == "started":
                try:
                    beat = lg.r.get(BEAT + key)
                except (_redis.exceptions.RedisError, OSError):
                    beats.pop(tid, None)
                    continue
                prev = beats.get(tid)
                if prev is None or prev[0] != beat:
                    beats[tid] = (beat, now)
                elif now - prev[1] >= c.RUN_LEASE:
                    why = ("task %s (key %s) started on %s at %s and its run stopped beating for %d s before it "
                           "finished (its worker was killed or lost); it may have partly run and is not run again"
                           % (tid, key, e.get("worker"), when(e.get("started_at")), c.RUN_LEASE))
                    if lg.lose(key, e.get("token", ""), why):
                        out[tid] = TaskLost(why, tid, key)
            if tid in out:
                del pending[tid]
                beats.pop(tid, None)
                absent.pop(tid, None)
        if not pending:
            break
        if now >= next_scan:
            next_scan = now + 1.0
            unclaimed = [t for t in pending if not entries.get(pending[t])]
            held = _held_ids(broker) if unclaimed else set()
            for tid in unclaimed:
                if held is None or tid in held:
                    absent.pop(tid, None)
                elif tid not in absent:
                    absent[tid] = now
                elif now - absent[tid] >= c.LOST_AFTER:
                    key = pending[tid]
                    why = ("task %s (key %s) was lost by the broker: no worker started it and the broker no longer "
                           "holds its message (a Redis restarted without its data?); it will not run" % (tid, key))
                    try:
                        if lg.lose(key, "", why):
                            out[tid] = TaskLost(why, tid, key)
                            del pending[tid]
                    except StoreUnavailable:
                        pass
        if now >= end:
            break
        time.sleep(0.25)
    for tid, key in pending.items():
        e = entries.get(key) or {}
        if e.get("state") == "started":
            where = "running on %s since %s" % (e.get("worker"), when(e.get("started_at")))
        else:
            where = "not started by any worker yet (queued or reserved)"
        out[tid] = TaskTimeout("task %s (key %s) has no record after %g s: %s" % (tid, key, timeout, where),
                               tid, key)
    return out


def _metas(app: Any, pending: Dict[str, str]) -> Dict[str, Any]:
    """Celery's own results (a failure decoded to its exception, as Celery does)."""
    ids = list(pending)
    raw = app.backend.client.mget([app.backend.get_key_for_task(t) for t in ids]) if ids else []
    return {t: app.backend.decode_result(v) for t, v in zip(ids, raw) if v is not None}
