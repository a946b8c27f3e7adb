// nsbox warm pool, Node: preloaded with --require (NODE_OPTIONS) while node
// starts `node /tmp/main.js`, before the main module is loaded. It waits for
// the code on stdin (the pool's channel), writes it where `nsbox run-code`
// puts it and takes back what it changed (NODE_OPTIONS, its entry in the
// module cache), so that the main module that now loads sees the process a
// cold run would. TARGET, and PRELOAD (module names required before the wait:
// a pool's preload), are set by the pool before this text runs.
'use strict';
(function nsboxWarm(target, preload) {
  const fs = require('fs');
  for (const m of preload) {
    try {
      require(m);
    } catch (e) {
      fs.writeSync(2, 'nsbox: warm pool: preload ' + m + ': ' + e.message + '\n');
      process.reallyExit(125);
    }
  }
  const parts = [];
  const buf = Buffer.alloc(1 << 16);
  try {
    for (;;) {
      const n = fs.readSync(0, buf, 0, buf.length, null);
      if (n === 0) break;
      parts.push(Buffer.from(buf.subarray(0, n)));
    }
    const fd = fs.openSync(target, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL |
      fs.constants.O_NOFOLLOW, 0o644);
    try {
      fs.writeSync(fd, Buffer.concat(parts));
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    fs.writeSync(2, 'nsbox: warm pool: take the code: ' + e.message + '\n');
    process.reallyExit(125);
  }
  delete process.env.NODE_OPTIONS;
  delete require.cache[__filename];
})(TARGET, PRELOAD);
