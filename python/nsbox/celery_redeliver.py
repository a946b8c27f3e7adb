"""Fast redelivery for nsbox.celery's workers (Redis broker).

Kombu's Redis transport keeps each delivered, unacknowledged message in the
`unacked` hash and puts it back on the queue only after the visibility timeout,
checked about every 100 s: a dead worker's prefetched messages, which never
started, waited minutes. Each worker here does three things:

- it notes every message it receives in `nsbox:held:NODE` (delivery tag ->
  task id and idempotency key), and beats `nsbox:alive:NODE` every second;
- when its consumer (re)starts, after a lost broker connection, Celery has
  dropped the messages it had reserved: it puts back those that never started;
- a reaper thread watches the other workers' beats: a worker whose beat stood
  still for the worker lease (by the watcher's clock) is gone, and its held
  messages that never started go back on the queue at once. A message whose
  run ended (its ledger entry finished or lost) but which was never
  acknowledged (the broker was away at that moment) is put back as well once
  it stayed so for a lease: its redelivery returns the stored answer.

Putting a message back uses kombu's own `restore_by_tag` (a WATCHed
transaction: a message acknowledged or restored meanwhile is left alone).
A message whose run started is never put back here: the ledger decides
what becomes of it (docs/scale.md). Restoring too eagerly costs a duplicate
delivery, never a second run: the ledger's claim admits one run per key.
"""
from __future__ import annotations

import base64
import json
import logging
import threading
import time
from typing import Any, Dict, Optional, Tuple

import redis

from .celery_ledger import Ledger

log = logging.getLogger("nsbox.celery")

NODES = "nsbox:nodes"
HELD = "nsbox:held:"
ALIVE = "nsbox:alive:"
UNACKED = "unacked"          # kombu's Redis transport (Channel.unacked_key)
RESTORED = "nsbox:restored"  # a counter: messages this module put back (for operators)


def message_ids(payload: bytes) -> Optional[Tuple[str, Optional[str]]]:
    """(task id, idempotency key given) of a kombu `unacked` entry, or None."""
    try:
        raw = json.loads(payload)[0]
        tid = raw["headers"]["id"]
        key = None
        if raw.get("content-type") == "application/json":
            body = raw["body"]
            if raw.get("properties", {}).get("body_encoding") == "base64":
                body = base64.b64decode(body)
            kw = json.loads(body)[1]
            key = kw.get("idempotency_key") if isinstance(kw, dict) else None
        return str(tid), key if isinstance(key, str) else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


class Redeliverer:
    def __init__(self, app: Any, node: str, ledger: Ledger, broker_url: str, lease: float,
                 key_of: Any) -> None:
        self.app, self.node, self.ledger, self.lease, self.key_of = app, node, ledger, lease, key_of
        self.r = redis.Redis.from_url(broker_url, socket_timeout=2, socket_connect_timeout=1)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nsbox-redeliver", daemon=True)
        self._conn: Any = None
        # What the reaper has seen: node -> (beat, since); tag -> ids; tag -> since ended.
        self._beats: Dict[str, Tuple[Optional[bytes], float]] = {}
        self._ids: Dict[str, Optional[Tuple[str, Optional[str]]]] = {}
        self._ended: Dict[str, float] = {}

    # ---- the worker's main process ----------------------------------------

    def held(self, tag: str, task_id: str, key: Optional[str]) -> None:
        try:
            p = self.r.pipeline(transaction=False)
            p.sadd(NODES, self.node).hset(HELD + self.node, tag, json.dumps([task_id, key])).execute()
        except redis.exceptions.RedisError:
            pass   # then only the visibility timeout brings it back

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(5)

    def restore_own(self) -> int:
        """At a consumer (re)start: the messages this node held before were
        dropped by Celery; put back those that never started."""
        try:
            return self._restore_held(self.node)
        except redis.exceptions.RedisError as e:
            log.warning("nsbox.celery: could not put back this worker's reserved messages: %s", e)
            return 0

    # ---- the reaper ------------------------------------------------------------

    def _restore(self, tag: str) -> None:
        if self._conn is None:
            self._conn = self.app.connection_for_write()
        try:
            self._conn.default_channel.qos.restore_by_tag(tag, leftmost=False)
        except Exception:
            conn, self._conn = self._conn, None
            try:
                conn.release()
            except Exception:
                pass
            raise
        self.r.incr(RESTORED)

    def _restore_held(self, node: str) -> int:
        """Put back node's held messages that never started; forget the rest."""
        held = self.r.hgetall(HELD + node)
        if not held:
            return 0
        ids = {}
        for tag, v in held.items():
            try:
                tid, key = json.loads(v)
            except ValueError:
                continue
            ids[tag.decode()] = self.key_of(tid, key)
        entries = self.ledger.get_many(set(ids.values()))
        n = 0
        for tag, key in ids.items():
            if not entries.get(key) and self.r.hexists(UNACKED, tag):
                self._restore(tag)
                n += 1
            # Started: left to the ledger; finished or lost: the reaper's.
            self.r.hdel(HELD + node, tag)
        if n:
            log.warning("nsbox.celery: put back %d never-started message(s) held by %s", n, node)
        return n

    def _dead(self, node: str, now: float) -> bool:
        beat = self.r.get(ALIVE + node)
        prev = self._beats.get(node)
        if prev is None or prev[0] != beat:
            self._beats[node] = (beat, now)
            return False
        return now - prev[1] >= self.lease

    def _sweep(self) -> None:
        now = time.monotonic()
        for raw in self.r.smembers(NODES):
            node = raw.decode()
            if node != self.node and self._dead(node, now):
                self._restore_held(node)
                if not self.r.hlen(HELD + node):
                    self.r.srem(NODES, node)
                    self._beats.pop(node, None)
        # Ended runs whose message was never acknowledged.
        tags = [t.decode() for t in self.r.hkeys(UNACKED)]
        new = [t for t in tags if t not in self._ids]
        if new:
            for t, payload in zip(new, self.r.hmget(UNACKED, new)):
                self._ids[t] = message_ids(payload) if payload else None
        live = set(tags)
        for t in list(self._ids):
            if t not in live:
                del self._ids[t]
                self._ended.pop(t, None)
        keyed = {t: self.key_of(*ids) for t, ids in self._ids.items() if ids}
        entries = self.ledger.get_many(set(keyed.values()))
        for t, key in keyed.items():
            if entries.get(key, {}).get("state") in ("finished", "lost"):
                since = self._ended.setdefault(t, now)
                if now - since >= self.lease:
                    self._restore(t)
                    self._ended.pop(t, None)
            else:
                self._ended.pop(t, None)

    def _prune_own(self) -> None:
        # Held entries whose message was acknowledged.
        tags = [t for t in self.r.hkeys(HELD + self.node)]
        if tags:
            p = self.r.pipeline(transaction=False)
            for t in tags:
                p.hexists(UNACKED, t)
            gone = [t for t, there in zip(tags, p.execute()) if not there]
            if gone:
                self.r.hdel(HELD + self.node, *gone)

    def _loop(self) -> None:
        n = 0
        while not self.stop_event.wait(1.0):
            n += 1
            try:
                p = self.r.pipeline(transaction=False)
                p.sadd(NODES, self.node).incr(ALIVE + self.node).expire(ALIVE + self.node, 86400).execute()
                self._sweep()
                if n % 10 == 0:
                    self._prune_own()
            except Exception as e:    # the broker away (a restart), a bad entry: next round
                log.info("nsbox.celery: redelivery sweep: %s", e)
                self._beats.clear()   # a pause of ours is no one's death

