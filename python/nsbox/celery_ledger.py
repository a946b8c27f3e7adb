"""The durable ledger behind nsbox.celery: one entry per idempotency key, in
Redis (the result backend's), written before a task's code runs and before
its message is acknowledged.

An entry is a hash `nsbox:task:KEY`:

    state       started | finished | lost
    token       who holds the run (one per execution attempt)
    task_id, worker, started_at
    record      the run's record (JSON), once finished
    reason      why it is lost, once lost

and a heartbeat `nsbox:beat:KEY`, a counter the running pool process
increments while the code runs. Whether a run is alive is judged by watching
that counter advance, by the watcher's own clock, never by comparing clocks or
by a key's TTL: a Redis restart that outlasts a TTL must not kill live runs.

Transitions are compare-and-set scripts, so two deliveries of one task (a
redelivery, a restored message, a client that gave up) can never both run the
code: the first `claim` wins; every later one sees the entry. This module
never runs code and never builds a record: it stores the SDK's.

Redis must keep what it acknowledged (`appendonly yes`, `appendfsync always`:
docs/scale.md); what a Redis without persistence forgets cannot be guarded.
"""
from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

import redis

T = TypeVar("T")

PREFIX = "nsbox:task:"
# An idempotency key a caller may give.
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}")
BEAT = "nsbox:beat:"

# KEYS[1] entry; ARGV token, task_id, worker, started_at, ttl.
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'started', 'token', ARGV[1], 'task_id', ARGV[2],
           'worker', ARGV[3], 'started_at', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""
# KEYS[1] entry; ARGV token, record, finished_at, ttl, task_id, worker. An
# entry that vanished (a Redis that lost its data while the code ran) is
# written anew: this run is the only one its key had. 2: written anew.
_FINISH = """
local tok = redis.call('HGET', KEYS[1], 'token')
if tok == false then
  redis.call('HSET', KEYS[1], 'state', 'finished', 'token', ARGV[1], 'task_id', ARGV[5], 'worker', ARGV[6],
             'record', ARGV[2], 'finished_at', ARGV[3], 'restored', '1')
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return 2
end
if tok ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'started' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'finished', 'record', ARGV[2], 'finished_at', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""
# Nothing ran (nsbox failed in setup): the key is free again for a retry.
_RELEASE = """
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'started' then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""
# KEYS[1] entry; ARGV expected token ('' = no entry may exist), reason, ttl.
_LOSE = """
local tok = redis.call('HGET', KEYS[1], 'token')
if ARGV[1] == '' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
elseif tok ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'started' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'lost', 'reason', ARGV[2])
if ARGV[1] == '' then redis.call('HSET', KEYS[1], 'token', '') end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


class StoreUnavailable(ConnectionError):
    """The ledger's Redis did not answer within the wait the worker allows."""


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class Ledger:
    """The ledger on one Redis. Every call retries while Redis is unreachable
    (a restart), for at most `wait` seconds, then raises StoreUnavailable."""

    def __init__(self, url: str, ttl: int, wait: float) -> None:
        self.r = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2,
                                      health_check_interval=10)
        self.ttl = ttl
        self.wait = wait
        self._claim = self.r.register_script(_CLAIM)
        self._finish = self.r.register_script(_FINISH)
        self._release = self.r.register_script(_RELEASE)
        self._lose = self.r.register_script(_LOSE)

    def patient(self, f: Callable[[], T], wait: Optional[float] = None) -> T:
        end = time.monotonic() + (self.wait if wait is None else wait)
        delay = 0.1
        while True:
            try:
                return f()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    redis.exceptions.BusyLoadingError) as e:
                if time.monotonic() >= end:
                    raise StoreUnavailable("the task ledger's Redis did not answer: %s" % e) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    # ---- reading -----------------------------------------------------------

    def get(self, key: str) -> Dict[str, str]:
        raw = self.patient(lambda: self.r.hgetall(PREFIX + key))
        return {_text(k): _text(v) for k, v in raw.items()}

    def get_many(self, keys: Any, wait: Optional[float] = None) -> Dict[str, Dict[str, str]]:
        keys = list(keys)

        def read() -> Any:
            p = self.r.pipeline(transaction=False)
            for k in keys:
                p.hgetall(PREFIX + k)
            return p.execute()
        return {k: {_text(a): _text(b) for a, b in raw.items()} for k, raw in zip(keys, self.patient(read, wait))}

    def beat(self, key: str) -> Optional[int]:
        v = self.patient(lambda: self.r.get(BEAT + key))
        return int(v) if v is not None else None

    # ---- transitions (compare-and-set) -----------------------------------

    def claim(self, key: str, token: str, task_id: str, worker: str) -> bool:
        """Take the key for a run that is about to start; False if an entry exists."""
        return bool(self.patient(lambda: self._claim(keys=[PREFIX + key],
                                                     args=[token, task_id, worker, repr(time.time()), self.ttl])))

    def finish(self, key: str, token: str, record: Dict[str, Any], task_id: str = "", worker: str = "") -> int:
        """1: stored; 2: stored anew (the entry had vanished); 0: the entry
        moved on (declared lost meanwhile)."""
        doc = json.dumps(record, separators=(",", ":"))
        return int(self.patient(lambda: self._finish(keys=[PREFIX + key],
                                                     args=[token, doc, repr(time.time()), self.ttl, task_id, worker])))

    def release(self, key: str, token: str) -> bool:
        return bool(self.patient(lambda: self._release(keys=[PREFIX + key], args=[token])))

    def lose(self, key: str, token: str, reason: str) -> bool:
        """Mark the run holding `token` lost ('' : mark a key no run took, so
        none ever will). False when the entry moved on meanwhile."""
        return bool(self.patient(lambda: self._lose(keys=[PREFIX + key], args=[token, reason, self.ttl])))

    # ---- liveness ----------------------------------------------------------

    def heartbeat(self, key: str, every: float) -> "Heartbeat":
        return Heartbeat(self.r, BEAT + key, every, self.ttl)

    def watch(self, counter: str, lease: float, until: Optional[Callable[[], bool]] = None) -> bool:
        """Watch a heartbeat counter (a full key) for `lease` seconds of
        reachable Redis: True as soon as it moves (alive) or `until()` holds,
        False when it stood still that long (gone)."""
        seen: Optional[Tuple[Optional[bytes]]] = None
        still = 0.0
        last = time.monotonic()
        while True:
            try:
                v = (self.r.get(counter),)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                seen, still, last = None, 0.0, time.monotonic()     # start over once it is back
                time.sleep(0.5)
                continue
            now = time.monotonic()
            if seen is not None and v != seen:
                return True
            if seen is not None:
                still += now - last
            seen, last = v, now
            if until is not None and until():
                return True
            if still >= lease:
                return False
            time.sleep(min(0.25, lease / 8))


class Heartbeat:
    """A thread that increments a counter every `every` seconds until stopped;
    Redis being away only pauses it."""

    def __init__(self, r: "redis.Redis", key: str, every: float, ttl: int) -> None:
        self.r, self.key, self.every, self.ttl = r, key, every, ttl
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nsbox-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._beat()
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_event.set()
        self.thread.join()

    def _beat(self) -> None:
        try:
            p = self.r.pipeline(transaction=False)
            p.incr(self.key).expire(self.key, self.ttl).execute()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            pass

    def _loop(self) -> None:
        while not self.stop_event.wait(self.every):
            self._beat()
