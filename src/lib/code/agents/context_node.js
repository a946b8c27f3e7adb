// nsbox code context, Node agent: `node -e <this text>` in the sandbox, fd 3
// a stream socket to the host (docs/contexts-protocol.md). Cells run one
// after another in the global context, as in the node REPL (a vm context of
// its own would make require()d arrays fail instanceof). Self-contained
// (Node 18+ core); what it uses is bound before the first cell. The channel
// is read asynchronously: timers, promises, servers run between cells.
'use strict';
(function nsboxAgent() {
  const [fs, net, util, vm] = ['fs', 'net', 'util', 'vm'].map(require);
  const { inspect, types: { isPromise } } = util;
  const { stringify, parse } = JSON;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const exit0 = process.exit;
  const realExit = (code) => exit0.call(process, code);
  const LIMIT = 16 << 20;
  // process.stdout/stderr write to fd 1/2 synchronously, past the stream
  // machinery: a SIGINT (V8 termination) inside a cell's console.log leaves
  // no stream stuck, and a cell's output is in the pipes when it ends.
  function writeAll(fd, b) {
    for (let off = 0; off < b.length;) {
      try { off += fs.writeSync(fd, b, off); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
    }
  }
  function stdio(fd) {
    const s = new (require('stream').Writable)({ write(c, e, cb) { writeAll(fd, c); cb(); } });
    s.write = function write(chunk, enc, cb) {
      if (typeof enc === 'function') [cb, enc] = [enc, undefined];
      writeAll(fd, typeof chunk === 'string' ? Buffer.from(chunk, enc || 'utf8') : chunk);
      if (typeof cb === 'function') process.nextTick(cb);
      return true;
    };
    s.fd = fd;
    Object.defineProperty(process, fd === 1 ? 'stdout' : 'stderr', { configurable: true, enumerable: true, get: () => s });
    return s;
  }
  const stdout = stdio(1);
  const stderr = stdio(2);
  // The global console loads its colour check lazily at its first write: a
  // SIGINT during that load left it half-made for good ("shouldColorize is
  // not a function" in every later console.log). Load it now, into a sink.
  {
    const sink = new (require('stream').Writable)({ write(c, e, cb) { cb(); } });
    console._stdout = sink;
    console._stderr = sink;
    console.log('%o', {});
    console.error('%o', {});
    console._stdout = stdout;
    console._stderr = stderr;
  }
  const say = (t) => { try { stderr.write(t); } catch (_) { /* fd 2 gone */ } };
  function die(why) {
    // The host broke the protocol: fail closed, distinctly.
    say('nsbox context agent: ' + why + '\n');
    realExit(2);
  }
  // Replies: strict UTF-8 JSON without NUL (jansson's defaults).
  function text(s) {
    s = Buffer.from(String(s), 'utf8').toString('utf8').replace(/\0/g, '?');
    return s.length <= 4000 ? s : s.slice(0, 4000) + '...';
  }
  // A cell sees require, module, exports, the core modules as lazy globals
  // (as in the REPL) and no execArgv (fork() would run this text again).
  process.execArgv = [];
  delete globalThis.__filename;
  delete globalThis.__dirname;
  for (const name of require('module').builtinModules) {
    if (!/^[a-z][a-z0-9_]*$/.test(name) || name in globalThis) continue;
    const set = (value) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true });
    Object.defineProperty(globalThis, name, { configurable: true, get: () => { const v = require(name); set(v); return v; }, set });
  }
  // SIGINT must never kill the agent. breakOnSigint is node's SIGINT
  // watchdog: its first start installs its handler over SIGINT and its last
  // stop installs node's SignalExit (re-raise: death) until a JS SIGINT
  // listener is added again, and vm drops those listeners (SIG_DFL) before the
  // start: each run opened two windows where a SIGINT kills. So a guard
  // thread keeps the watchdog started for the agent's life (runs nested
  // DEPTH deep, each with breakOnSigint): starts and stops are counted, only
  // the outermost ever touches SIGINT, and the main thread has no SIGINT
  // listener. A SIGINT goes to the run registered last: the cell's while it
  // runs, else the guard's innermost (which posts it here, and runs again).
  // The guard is torn down only by DEPTH SIGINTs each landing in the
  // microseconds the previous one's run takes to restart.
  const guard = (function startGuard() {
    const DEPTH = 4;
    const st = new Int32Array(new SharedArrayBuffer(16)); // [innermost in, (stays 0), cell running, cell runs]
    const w = new (require('worker_threads').Worker)(`'use strict';
      const vm = require('vm');
      const { parentPort, workerData: st } = require('worker_threads');
      globalThis.nsboxGuard = (depth) => {
        for (;;) {
          try {
            vm.runInThisContext(depth > 1 ? 'nsboxGuard(' + (depth - 1) + ')'
              : 'Atomics.store(nsboxGuardState, 0, 1); Atomics.notify(nsboxGuardState, 0); for (;;) Atomics.wait(nsboxGuardState, 1, 0)',
            { breakOnSigint: true });
          } catch (_) { /* a SIGINT */ }
          if (depth === 1) Atomics.store(st, 0, 0);
          parentPort.postMessage(Atomics.load(st, 3));
          // Taken from a cell that started as this run was restarting: run
          // again after it, not on top of it (the cell's SIGINTs would come here).
          while (Atomics.load(st, 2) === 1) Atomics.wait(st, 2, 1);
        }
      };
      globalThis.nsboxGuardState = st;
      nsboxGuard(${DEPTH});`, { eval: true, workerData: st, stdout: true, stderr: true });
    w.unref();
    // The outer run reaches its closure through the global object (`this`
    // at a script's top level), briefly, under a name no cell uses.
    const INNER = 'nsboxCell' + require('crypto').randomBytes(8).toString('hex');
    const outer = new vm.Script('this.' + INNER + '()');
    const g = {
      onsigint: null,
      gen: () => Atomics.load(st, 3),
      run(fn) {
        // Let the guard's innermost run be in (after a SIGINT it restarts).
        if (Atomics.load(st, 0) === 0) Atomics.wait(st, 0, 0, 100);
        Atomics.add(st, 3, 1);
        Atomics.store(st, 2, 1);
        // One run of the main thread's spans the whole start of the cell, so
        // that no SIGINT reaches the guard meanwhile (the guard would wait
        // for the cell's end to run again: a gap): a SIGINT in it between
        // the runs below interrupts the cell.
        Object.defineProperty(globalThis, INNER, { configurable: true, value: () => {
          delete globalThis[INNER];
          // A SIGINT sent before the cell's frame can still be on its way
          // (signal, watchdog thread) and would end the cell: a 5 ms run
          // takes it first.
          try { vm.runInThisContext('Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5)', { breakOnSigint: true }); } catch (_) { /* stale */ }
          return fn();
        } });
        try {
          return outer.runInThisContext({ breakOnSigint: true, displayErrors: false });
        } finally {
          delete globalThis[INNER];
          Atomics.store(st, 2, 0);
          Atomics.notify(st, 2);
        }
      },
    };
    w.on('message', (gen) => { if (g.onsigint) g.onsigint(gen); });
    w.on('error', (e) => say('nsbox context agent: the SIGINT guard failed: ' + describe(e) + '\n'));
    // Ready only once SIGINT is the watchdog's (before, a SIGINT kills).
    Atomics.wait(st, 0, 0, 10000);
    return g;
  })();
  // process.exit() in a cell ends the cell (status "exit"), not the context,
  // like SystemExit in Python: it throws (a catch can swallow it).
  class ExitSignal { constructor(code) { this.code = code; } }
  let current = null; // the cell being run or awaited: {id, awaiting, done}
  process.exit = function exit(code) {
    if (!current || current.done) realExit(code);
    const n = code === undefined || code === null ? 0 : Number(code);
    throw new ExitSignal(Number.isInteger(n) ? n & 0xff : 1);
  };
  const sock = new net.Socket({ fd: 3, readable: true, writable: true, allowHalfOpen: true });
  function send(obj) {
    const body = Buffer.from(stringify(obj), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length, 0);
    sock.write(Buffer.concat([head, body]));
  }
  function describe(e) {
    try {
      return text(e instanceof Error ? (e.message === '' ? e.name : e.name + ': ' + e.message) : 'Uncaught ' + inspect(e));
    } catch (_) { return 'Uncaught exception'; }
  }
  function report(e) {
    // The stack without vm's and this text's frames.
    let s = 'Uncaught exception (cannot be shown)';
    try {
      const st = e instanceof Error ? e.stack : '';
      const i = typeof st === 'string' ? st.search(/\n\s+at [^\n]*(node:vm:|\[eval\])/) : -1;
      if (i >= 0) try { e.stack = st.slice(0, i); } catch (_) { /* frozen */ }
      s = (e instanceof Error ? '' : 'Uncaught ') + inspect(e);
    } catch (_) { /* a hostile getter */ }
    say(s + '\n');
  }
  const queue = [];
  let count = 0, eof = false;
  function finish(cell, status, exitCode, error) {
    if (cell.done) return;
    cell.done = true;
    send({ id: cell.id, status, exit_code: exitCode, error, results: cell.results || [] });
    current = null;
    next();
  }
  function fail(cell, e) {
    if (cell.done) return;
    if (e instanceof ExitSignal) return finish(cell, 'exit', e.code, null);
    let code;
    try { code = e instanceof Error ? e.code : undefined; } catch (_) { /* a getter */ }
    if (code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      say('Interrupted: ' + e.message + '\n');
      return finish(cell, 'interrupted', 130, 'Interrupted');
    }
    report(e);
    finish(cell, 'error', 1, describe(e));
  }
  // The completion value: shown on stdout, and a result by MIME type
  // (text/plain as inspect shows it; application/json for data JSON can
  // carry). Bounded like the Python agent's.
  function display(v, cell) {
    if (v === undefined) return;
    let plain = 'undefined';
    try { plain = inspect(v); } catch (_) { /* a hostile getter */ }
    stdout.write(plain + '\n');
    if (!cell) return;
    const b = { 'text/plain': text(plain) };
    try {
      if (v !== null && (typeof v === 'object' || typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean')) {
        const j = JSON.stringify(v);
        if (typeof j === 'string' && j.length <= (8 << 20)) b['application/json'] = j;
      }
    } catch (_) { /* cycles, BigInt, getters */ }
    (cell.results = cell.results || []).push(b);
  }
  function start(cell, code) {
    const filename = '<cell ' + ++count + '>';
    let value;
    try {
      let script;
      if (/^\s*\{/.test(code) && /\}\s*$/.test(code)) {
        // An object literal, not a block (REPL)
        try { script = new vm.Script('(' + code + '\n)', { filename }); } catch (_) { /* a block */ }
      }
      if (!script) script = new vm.Script(code, { filename });
      value = guard.run(() => script.runInThisContext({ breakOnSigint: true, displayErrors: true }));
      if (isPromise(value)) {
        // A promise is awaited, its value shown.
        cell.awaiting = true;
        cell.gen = guard.gen();
        value.then((v) => {
          if (cell.done) return;
          try { display(v, cell); } catch (e) { return fail(cell, e); }
          finish(cell, 'ok', 0, null);
        }, (e) => fail(cell, e));
        return;
      }
      display(value, cell);
    } catch (e) {
      return fail(cell, e);
    }
    finish(cell, 'ok', 0, null);
  }
  function next() {
    if (current) return;
    if (!queue.length) {
      if (eof) realExit(0);
      return;
    }
    const req = queue.shift();
    current = { id: req.id, awaiting: false, done: false };
    // In the check phase: a SIGINT that came with the frame is ignored first.
    const cell = current;
    setImmediate(() => start(cell, req.code));
  }
  // A cell's process.on('SIGINT') must not give SIGINT back to libuv (its
  // handler would replace the watchdog's for good, and vm drops it, SIG_DFL,
  // around each later cell): node's starter of signal watchers skips SIGINT,
  // and such listeners get the guard's SIGINTs instead.
  for (const f of process.listeners('newListener')) {
    if (f.name !== 'startListeningIfSignal') continue;
    process.removeListener('newListener', f);
    process.on('newListener', function startListeningIfSignal(type, listener) {
      if (type !== 'SIGINT') return f.call(this, type, listener);
    });
  }
  // SIGINT: breakOnSigint while a cell runs, the guard's message while it
  // awaits its promise, else ignored (neither kills the agent nor reaches a
  // cell). The message names the cell run it came during: one from before
  // this cell's run is stale.
  guard.onsigint = (gen) => {
    if (process.listenerCount('SIGINT')) try { process.emit('SIGINT', 'SIGINT'); } catch (e) { uncaught(e); }
    const c = current;
    if (c && c.awaiting && !c.done && c.gen === gen) {
      say('Interrupted: SIGINT while awaiting the promise\n');
      finish(c, 'interrupted', 130, 'Interrupted');
    }
  };
  // An error thrown by a callback fails the awaited cell, else is shown.
  const uncaught = (e) => {
    const c = current;
    if (c && c.awaiting && !c.done) return fail(c, e);
    if (e instanceof ExitSignal) realExit(e.code);
    report(e);
  };
  process.on('uncaughtException', uncaught);
  process.on('unhandledRejection', uncaught);
  let chunks = [], have = 0, want = 4;
  sock.on('data', (chunk) => {
    chunks.push(chunk);
    have += chunk.length;
    while (have >= want) {
      const b = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, have);
      const n = b.readUInt32BE(0);
      if (n > LIMIT) die('frame of ' + n + ' bytes (over ' + LIMIT + ')');
      chunks = [b];
      if (have < (want = 4 + n)) break;
      let req;
      try { req = parse(decoder.decode(b.subarray(4, 4 + n))); } catch (_) { die('a frame that is not UTF-8 JSON'); }
      if (req === null || typeof req !== 'object' || Array.isArray(req)) die('a frame that is not an object');
      if (!Number.isSafeInteger(req.id) || typeof req.code !== 'string') die('a cell needs an integer id and a string code');
      queue.push({ id: req.id, code: req.code });
      const rest = b.subarray(4 + n);
      [chunks, have, want] = [rest.length ? [rest] : [], rest.length, 4];
    }
    next();
  });
  sock.on('end', () => {
    if (have) die('the host closed the channel inside a frame');
    eof = true;
    next();
  });
  sock.on('error', () => realExit(0));
  send({ ready: true, lang: 'node', version: process.versions.node });
})();
