// nsbox code context, Node agent: run as `node -e <this text>` in the
// sandbox, fd 3 a connected stream socket to the host. It takes cells from
// the host and runs them one after another in the global context, as the
// node REPL does (useGlobal): a separate vm context would make arrays and
// buffers from require()d modules fail instanceof and deepStrictEqual.
// Protocol: docs/contexts-protocol.md. One self-contained text (Node 18+
// core): everything used is bound before the first cell, so a cell that
// rebinds JSON or process.stdout.write does not break the channel. The
// channel is read asynchronously so that timers, promises and servers a
// cell starts keep running between cells.
'use strict';
(function nsboxAgent() {
  const net = require('net');
  const util = require('util');
  const vm = require('vm');
  const inspect = util.inspect;
  const isPromise = util.types.isPromise;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const exit0 = process.exit;
  const realExit = (code) => exit0.call(process, code);
  const LIMIT = 16 << 20;
  const stdout = process.stdout;
  const stderr = process.stderr;

  function die(why) {
    // The host broke the protocol (or lies): fail closed, distinctly.
    try { stderr.write('nsbox context agent: ' + why + '\n'); } finally { realExit(2); }
  }

  // Replies are strict UTF-8 JSON without NUL (jansson's defaults).
  function text(s) {
    s = Buffer.from(String(s), 'utf8').toString('utf8').replace(/\0/g, '?');
    return s.length <= 4000 ? s : s.slice(0, 4000) + '...';
  }

  // What a cell sees: the -e globals require, module, exports (no
  // __filename/__dirname, as in the REPL), the core modules as lazy globals
  // as in the REPL, and an execArgv without this text (child_process.fork
  // would run it again).
  process.execArgv = [];
  delete globalThis.__filename;
  delete globalThis.__dirname;
  for (const name of require('module').builtinModules) {
    if (!/^[a-z][a-z0-9_]*$/.test(name) || name in globalThis) continue;
    const set = (v) => Object.defineProperty(globalThis, name,
      { value: v, writable: true, configurable: true, enumerable: false });
    Object.defineProperty(globalThis, name, {
      configurable: true, enumerable: false,
      get() { const v = require(name); set(v); return v; },
      set,
    });
  }

  // process.exit() inside a cell ends the cell (status "exit"), not the
  // context, as SystemExit does in the Python agent: it throws, so a catch
  // in the cell can swallow it. Outside a cell it exits for real.
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
      if (e instanceof Error) return text(e.message === '' ? e.name : e.name + ': ' + e.message);
      return text('Uncaught ' + inspect(e));
    } catch (_) {
      return 'Uncaught exception';
    }
  }

  function report(e) {
    // The stack without the agent's frames (vm's and this text's).
    let s;
    try {
      if (e instanceof Error) {
        const st = e.stack;
        const i = typeof st === 'string' ? st.search(/\n\s+at [^\n]*(node:vm:|\[eval\])/) : -1;
        if (i >= 0) try { e.stack = st.slice(0, i); } catch (_) { /* frozen */ }
        s = inspect(e);
      } else {
        s = 'Uncaught ' + inspect(e);
      }
    } catch (_) {
      s = 'Uncaught exception (cannot be shown)';
    }
    stderr.write(s + '\n');
  }

  // The reply goes out once what the cell wrote has reached fd 1 and 2: a
  // write's callback runs after the earlier writes are done.
  function flushed(cb) {
    let n = 2;
    const one = () => { if (--n === 0) cb(); };
    for (const s of [stdout, stderr]) {
      try {
        if (s.writable && !s.destroyed) s.write('', one); else one();
      } catch (_) {
        one();
      }
    }
  }

  const queue = [];
  let count = 0;
  let eof = false;

  function finish(cell, status, exitCode, error) {
    if (cell.done) return;
    cell.done = true;
    flushed(() => {
      send({ id: cell.id, status, exit_code: exitCode, error });
      current = null;
      next();
    });
  }

  function fail(cell, e) {
    if (cell.done) return;
    if (e instanceof ExitSignal) return finish(cell, 'exit', e.code, null);
    let code;
    try { code = e instanceof Error ? e.code : undefined; } catch (_) { /* a getter */ }
    if (code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      stderr.write('Interrupted: ' + e.message + '\n');
      return finish(cell, 'interrupted', 130, 'Interrupted');
    }
    report(e);
    finish(cell, 'error', 1, describe(e));
  }

  function display(v) {
    if (v !== undefined) stdout.write(inspect(v) + '\n');
  }

  function start(cell, code) {
    const filename = '<cell ' + ++count + '>';
    let value;
    try {
      let script;
      if (/^\s*\{/.test(code) && /\}\s*$/.test(code)) {
        // An object literal, not a block, as in the REPL.
        try { script = new vm.Script('(' + code + '\n)', { filename }); } catch (_) { /* a block */ }
      }
      if (!script) script = new vm.Script(code, { filename });
      value = script.runInThisContext({ breakOnSigint: true, displayErrors: true });
      if (isPromise(value)) {
        // A promise is awaited and its value shown; SIGINT stops the wait.
        cell.awaiting = true;
        value.then((v) => {
          if (cell.done) return;
          try { display(v); } catch (e) { return fail(cell, e); }
          finish(cell, 'ok', 0, null);
        }, (e) => fail(cell, e));
        return;
      }
      display(value);
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
    // In the check phase: a SIGINT that came with the frame is seen (and
    // ignored) before the cell starts.
    const cell = current;
    setImmediate(() => start(cell, req.code));
  }

  // SIGINT: breakOnSigint handles it while a cell's code runs; this
  // listener while a cell awaits its promise; otherwise it is ignored (it
  // must neither kill the agent nor reach the next cell).
  process.on('SIGINT', () => {
    const c = current;
    if (c && c.awaiting && !c.done) {
      stderr.write('Interrupted: SIGINT while awaiting the promise\n');
      finish(c, 'interrupted', 130, 'Interrupted');
    }
  });
  // An error thrown by a callback (timer, promise) fails the cell that is
  // awaited, else it is shown and the context lives on, as in the REPL.
  const uncaught = (e) => {
    const c = current;
    if (c && c.awaiting && !c.done) return fail(c, e);
    if (e instanceof ExitSignal) realExit(e.code);
    report(e);
  };
  process.on('uncaughtException', uncaught);
  process.on('unhandledRejection', uncaught);

  let chunks = [];
  let have = 0;
  let want = 4;
  sock.on('data', (chunk) => {
    chunks.push(chunk);
    have += chunk.length;
    while (have >= want) {
      const b = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, have);
      const n = b.readUInt32BE(0);
      if (n > LIMIT) die('frame of ' + n + ' bytes (over ' + LIMIT + ')');
      if (have < 4 + n) {
        chunks = [b];
        want = 4 + n;
        break;
      }
      let req;
      try { req = parse(decoder.decode(b.subarray(4, 4 + n))); } catch (_) { die('a frame that is not UTF-8 JSON'); }
      if (req === null || typeof req !== 'object' || Array.isArray(req)) die('a frame that is not an object');
      if (!Number.isSafeInteger(req.id) || typeof req.code !== 'string') die('a cell needs an integer id and a string code');
      queue.push({ id: req.id, code: req.code });
      const rest = b.subarray(4 + n);
      chunks = rest.length ? [rest] : [];
      have = rest.length;
      want = 4;
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
