"""Fast redelivery for nsbox.celery's workers (Redis broker).

Kombu's Redis transport keeps each delivered, unacknowledged message in the
`unacked` hash and puts it back on the queue only after the visibility timeout,
checked about every 100 s: a dead worker's prefetched messages, which never
started, waited minutes. Each worker here does three things:

- it notes every message it receives in `nsbox:held:NODE` (delivery tag ->
  task id and idempotency key), and beats `nsbox:alive:NODE` every second;
- when its consumer (re)starts, after a lost broker connection, Celery has
  dropped the messages it had reserved: it puts back those that never started.
  Kombu moves a message from the queue to `unacked` in two steps (BRPOP,
  then HSET); a Redis killed between them keeps neither, and kombu drops the
  message when the second step fails. The worker keeps such a message (and
  each one it received, until acknowledged) in memory and publishes it again
  from that copy;
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
from typing import Any, Dict, List, Optional, Tuple

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


# Messages whose move to `unacked` failed (the broker went away between
# kombu's two steps): (raw message, exchange, routing key), main thread only.
failed_moves: List[Tuple[Any, str, str]] = []


def keep_failed_moves() -> None:
    """Wrap kombu's Redis QoS.append so that a message it could not note as
    unacknowledged is kept for republishing instead of vanishing."""
    try:
        from kombu.transport import redis as kredis
    except ImportError:
        return
    orig = getattr(kredis.QoS, "append", None)
    if orig is None or getattr(orig, "_nsbox", False):
        return

    def append(self: Any, message: Any, delivery_tag: Any) -> Any:
        try:
            return orig(self, message, delivery_tag)
        except Exception:
            di = getattr(message, "delivery_info", None) or {}
            failed_moves.append((message._raw, di.get("exchange", ""), di.get("routing_key", "")))
            raise
    append._nsbox = True  # type: ignore[attr-defined]
    kredis.QoS.append = append


class Redeliverer:
    def __init__(self, app: Any, node: str, ledger: Ledger, broker_url: str, lease: float,
                 key_of: Any) -> None:
        self.app, self.node, self.ledger, self.lease, self.key_of = app, node, ledger, lease, key_of
        self.r = redis.Redis.from_url(broker_url, socket_timeout=2, socket_connect_timeout=1)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nsbox-redeliver", daemon=True)
        # A broker connection per thread (the reaper's, the main loop's):
        # kombu's connections are not thread-safe.
        self._local = threading.local()
        # What the reaper has seen: node -> (beat, since); tag -> ids; tag -> since ended.
        self._beats: Dict[str, Tuple[Optional[bytes], float]] = {}
        self._ids: Dict[str, Optional[Tuple[str, Optional[str]]]] = {}
        self._ended: Dict[str, float] = {}
        # tag -> Celery request, from receipt until acknowledged (main thread).
        self.mem: Dict[str, Any] = {}

    # ---- the worker's main process ----------------------------------------

    def held(self, tag: str, task_id: str, key: Optional[str], request: Any = None) -> None:
        if request is not None:
            for t in [t for t, q in self.mem.items() if q.acknowledged]:
                del self.mem[t]
            self.mem[tag] = request
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
        # Each step again until it went through: Redis may still be
        # loading its data when the consumer is back (bounded: then the
        # visibility timeout brings the rest back).
        n = 0
        for step in (self._restore_moves, self._restore_mem, lambda: self._restore_held(self.node)):
            for attempt in range(40):
                try:
                    n += step()
                    break
                except Exception as e:
                    if attempt == 39:
                        log.warning("nsbox.celery: could not put back this worker's reserved messages: %s", e)
                    self.stop_event.wait(0.25)
        return n

    def _restore_mem(self) -> int:
        from celery.worker import state
        active = set(id(q) for q in state.active_requests)
        mine = {t: q for t, q in self.mem.items() if not q.acknowledged and id(q) not in active}
        for t in [t for t, q in self.mem.items() if q.acknowledged or t in mine]:
            del self.mem[t]
        if not mine:
            return 0
        keys = {t: self.key_of(q.id, (q.kwargs or {}).get("idempotency_key")) for t, q in mine.items()}
        entries = self.ledger.get_many(set(keys.values()))
        n = 0
        for t, q in mine.items():
            if entries.get(keys[t]):
                continue      # a run took it: the ledger answers
            if self.r.hexists(UNACKED, t):
                self._restore(t)
            else:
                self._republish(q)
            n += 1
        if n:
            log.warning("nsbox.celery: put back %d reserved, never-started message(s) after a broker "
                        "reconnection", n)
        return n

    def _restore_moves(self) -> int:
        n = 0
        while failed_moves:
            raw, ex, rk = failed_moves[0]
            ids = message_ids(json.dumps([raw, ex, rk]).encode())
            if ids is None or not self.ledger.get(self.key_of(*ids)):
                self._publish(raw, ex, rk)
                n += 1
            failed_moves.pop(0)
        if n:
            log.warning("nsbox.celery: published again %d message(s) the broker dropped while it went away", n)
        return n

    def _republish(self, request: Any) -> None:
        # The broker lost it (popped from the queue, never in `unacked`):
        # published again from the copy received.
        di = request.delivery_info or {}
        self._publish(request.message._raw, di.get("exchange", ""), di.get("routing_key", ""))

    def _channel(self) -> Any:
        if getattr(self._local, "conn", None) is None:
            self._local.conn = self.app.connection_for_write()
        return self._local.conn.default_channel

    def _drop_channel(self) -> None:
        conn, self._local.conn = getattr(self._local, "conn", None), None
        try:
            if conn is not None:
                conn.release()
        except Exception:
            pass

    def _publish(self, raw: Any, exchange: str, routing_key: str) -> None:
        # As kombu restores a message (flagged redelivered, at the front).
        try:
            ch = self._channel()
            with ch.conn_or_acquire() as client:
                pipe = client.pipeline()
                ch._do_restore_message(raw, exchange, routing_key, pipe)
                pipe.execute()
        except Exception:
            self._drop_channel()
            raise
        self.r.incr(RESTORED)

    # ---- the reaper ------------------------------------------------------------

    def _restore(self, tag: str) -> None:
        try:
            self._channel().qos.restore_by_tag(tag, leftmost=False)
        except Exception:
            self._drop_channel()
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

