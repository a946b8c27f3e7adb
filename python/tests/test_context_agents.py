"""The code-context agents (src/lib/code/agents/context_python.py and context_node.js), each a real
interpreter started as the host starts it (`python3 -I -u -c TEXT`, `node -e
TEXT`, fd 0 /dev/null, fd 1/2 pipes, fd 3 a socket), driven over the framed
JSON protocol of docs/contexts-protocol.md. Every reply is checked together
with the output the cell left on the pipes: the agent answers only after the
cell's output is written, so after a reply the output is read without waiting
(non-blocking) and must be complete."""
import json
import os
import random
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# The agents are the library's (src/lib/code/agents/), embedded at build
# time; python.test copies them beside the package.
AGENTS = os.environ.get("NSBOX_TEST_AGENTS") or os.path.join(os.path.dirname(os.path.dirname(HERE)), "src", "lib",
                                                              "code", "agents")
LIMIT = 16 << 20
WAIT = 60  # a bound against a hang, never a measure
# The interpreter the Python agent runs on (another one: to check 3.9+).
PYTHON = os.environ.get("NSBOX_TEST_AGENT_PYTHON", sys.executable)
OK = {"id": 1, "status": "ok", "exit_code": 0, "error": None}


def _source(name):
    with open(os.path.join(AGENTS, name), encoding="utf-8") as f:
        return f.read()


def _node():
    if os.environ.get("NSBOX_TEST_AGENT_NODE"):  # another one (a command line): to check Node 18
        return shlex.split(os.environ["NSBOX_TEST_AGENT_NODE"])
    node = shutil.which("node") or ("/usr/bin/node" if os.access("/usr/bin/node", os.X_OK) else None)
    if node is None:
        pytest.skip("node is not installed on this host: the Node agent is not tested")
    return [node]


class Agent:
    def __init__(self, argv):
        self.sock, child = socket.socketpair()
        # sh puts the socket (its stdin) on fd 3 and /dev/null on fd 0.
        self.proc = subprocess.Popen(["/bin/sh", "-c", 'exec "$@" 3<&0 </dev/null', "sh", *argv],
                                     stdin=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        child.close()
        self.fds = {self.proc.stdout.fileno(): bytearray(), self.proc.stderr.fileno(): bytearray()}
        for fd in self.fds:
            os.set_blocking(fd, False)
        self.buf = b""
        self.ready = self.reply()

    def close(self):
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def send(self, obj):
        data = json.dumps(obj).encode()
        self.sock.sendall(struct.pack(">I", len(data)) + data)

    def _read(self, fd):
        try:
            b = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        self.fds[fd] += b
        return bool(b)

    def pump(self, timeout):
        """Read what is there within timeout; the reply frame if one is complete."""
        r, _, _ = select.select([self.sock, *self.fds], [], [], timeout)
        for fd in r:
            if fd is self.sock:
                b = self.sock.recv(1 << 16)
                if not b:
                    raise EOFError
                self.buf += b
            else:
                self._read(fd)
        if len(self.buf) >= 4:
            n = struct.unpack(">I", self.buf[:4])[0]
            if len(self.buf) >= 4 + n:
                frame, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                r = json.loads(frame.decode("utf-8"))
                if "id" in r:   # a reply: its rich results (a list, always there) kept apart
                    assert isinstance(r.get("results"), list), r
                    self.results = r.pop("results")
                return r
        return None

    def reply(self):
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            r = self.pump(end - time.monotonic())
            if r is not None:
                return r
        raise AssertionError("no reply in %d s" % WAIT)

    def output(self):
        """What the cell wrote: all there at reply time, so read without waiting."""
        for fd in self.fds:
            while self._read(fd):
                pass
        out, err = (bytes(b).decode("utf-8", "replace") for b in self.fds.values())
        for b in self.fds.values():
            b.clear()
        return out, err

    def run(self, code, cell_id=1):
        self.output()
        self.send({"id": cell_id, "code": code})
        r = self.reply()
        assert r["id"] == cell_id
        return (r, *self.output())

    def interrupt(self, code, marker):
        """Run code, wait for marker on stdout, then SIGINT until the reply (at most 10 s)."""
        self.output()
        self.send({"id": 7, "code": code})
        end = time.monotonic() + WAIT
        while marker.encode() not in self.fds[self.proc.stdout.fileno()]:
            assert time.monotonic() < end, "the cell did not start"
            assert self.pump(1) is None, "the cell ended by itself"
        end = time.monotonic() + 10
        while time.monotonic() < end:
            self.proc.send_signal(signal.SIGINT)
            r = self.pump(0.1)
            if r is not None:
                return (r, *self.output())
        raise AssertionError("SIGINT did not interrupt the cell in 10 s")

    def exit_status(self):
        """The agent's exit status once it is gone (the channel reads EOF)."""
        end = time.monotonic() + WAIT
        while True:
            try:
                assert self.pump(end - time.monotonic()) is None, "a reply after the end"
            except EOFError:
                break
            assert time.monotonic() < end, "the agent did not end"
        return self.proc.wait(WAIT)


# Per language: how to start it and the cells that say the same thing.
LANGS = {
    "python": dict(
        argv=lambda: [PYTHON, "-I", "-u", "-c", _source("context_python.py")],
        version=lambda: subprocess.run([PYTHON, "-c", "import platform; print(platform.python_version())"],
                                       capture_output=True, text=True, check=True).stdout.strip(),
        set="x = 21", use="print(x * 2)", last="x * 2", last_none="None", last_str="'a' + 'b'",
        last_str_out="'ab'\n", stmt="y = x",
        raise_="1 / 0", raise_error="ZeroDivisionError: division by zero",
        syntax="x = = 1", syntax_error="SyntaxError: invalid syntax",
        exit3="import sys\nsys.exit(3)", exit_none="import sys\nsys.exit()", exit_256="raise SystemExit(257)",
        spin="print('spin', flush=True)\nwhile True:\n    pass",
        sleep="import time\nprint('spin', flush=True)\ntime.sleep(1000)",
        big="import sys\n_ = sys.stdout.write('a' * 1000000), sys.stderr.write('b' * 1000000)",
        child_fd3="import os\n_ = os.system('readlink /proc/$$/fd/3 || echo closed')",
    ),
    "node": dict(
        argv=lambda: [*_node(), "-e", _source("context_node.js")],
        version=lambda: subprocess.run([*_node(), "-p", "process.versions.node"], capture_output=True,
                                       text=True, check=True).stdout.strip(),
        set="var x = 21", use="console.log(x * 2)", last="x * 2", last_none="undefined",
        last_str="'a' + 'b'", last_str_out="'ab'\n", stmt="var y = x;",
        raise_="null.f", raise_error="TypeError: Cannot read properties of null (reading 'f')",
        syntax="let = = 1", syntax_error="SyntaxError: Unexpected token '='",
        exit3="process.exit(3)", exit_none="process.exit()", exit_256="process.exit(257)",
        spin="console.log('spin'); while (true) {}",
        sleep="console.log('spin'); new Promise(() => {})",
        big="process.stdout.write('a'.repeat(1000000)); void process.stderr.write('b'.repeat(1000000))",
        child_fd3="void process.stdout.write(require('child_process')"
                  ".execSync('readlink /proc/$$/fd/3 || echo closed', {stdio: ['ignore', 'pipe', 'ignore']}))",
    ),
}


@pytest.fixture(params=sorted(LANGS))
def lang(request):
    return dict(LANGS[request.param], name=request.param)


@pytest.fixture
def agent(lang):
    a = Agent(lang["argv"]())
    yield a
    a.close()


def test_ready(agent, lang):
    assert agent.ready == {"ready": True, "lang": lang["name"], "version": lang["version"]()}


def test_state_persists(agent, lang):
    r, out, err = agent.run(lang["set"], 1)
    assert r == {"id": 1, "status": "ok", "exit_code": 0, "error": None}
    assert (out, err) == ("", "")
    r, out, err = agent.run(lang["use"], 2)
    assert (r["status"], out, err) == ("ok", "42\n", "")


def test_last_expression_is_shown(agent, lang):
    agent.run(lang["set"])
    assert agent.run(lang["last"])[1:] == ("42\n", "")
    assert agent.run(lang["last_str"])[1:] == (lang["last_str_out"], "")
    assert agent.run(lang["last_none"])[1:] == ("", "")
    assert agent.run(lang["stmt"])[1:] == ("", "")


def test_error_keeps_the_context(agent, lang):
    agent.run(lang["set"])
    r, out, err = agent.run(lang["raise_"], 3)
    assert r == {"id": 3, "status": "error", "exit_code": 1, "error": lang["raise_error"]}
    assert lang["raise_error"] in err and "<cell 2>" in err
    # No frame of the agent itself.
    for word in ("_nsbox_agent", "nsboxAgent", "<string>", "[eval]", "node:vm"):
        assert word not in err
    r, out, err = agent.run(lang["syntax"])
    assert (r["status"], r["exit_code"], r["error"]) == ("error", 1, lang["syntax_error"])
    assert "SyntaxError" in err and "<cell 3>" in err and "Traceback" not in err
    assert agent.run(lang["use"])[:2] == ({"id": 1, "status": "ok", "exit_code": 0, "error": None}, "42\n")


def test_exit_ends_the_cell_not_the_context(agent, lang):
    agent.run(lang["set"])
    assert agent.run(lang["exit3"])[0] == {"id": 1, "status": "exit", "exit_code": 3, "error": None}
    assert agent.run(lang["exit_none"])[0]["exit_code"] == 0
    assert agent.run(lang["exit_256"])[0]["exit_code"] == 1  # what a process's status would be
    assert agent.run(lang["use"])[:2] == ({"id": 1, "status": "ok", "exit_code": 0, "error": None}, "42\n")


@pytest.mark.parametrize("cell", ["spin", "sleep"])
def test_sigint_interrupts_and_the_context_survives(agent, lang, cell):
    agent.run(lang["set"])
    r, out, err = agent.interrupt(lang[cell], "spin")
    assert r == {"id": 7, "status": "interrupted", "exit_code": 130,
                 "error": "KeyboardInterrupt" if lang["name"] == "python" else "Interrupted"}
    assert ("KeyboardInterrupt" if lang["name"] == "python" else "Interrupted") in err
    # The SIGINTs sent after the reply (between cells) reach nothing.
    assert agent.run(lang["use"])[:3] == ({"id": 1, "status": "ok", "exit_code": 0, "error": None}, "42\n", "")


def test_sigint_between_cells_is_ignored(agent, lang):
    agent.run(lang["set"])
    for _ in range(3):
        agent.proc.send_signal(signal.SIGINT)
    # Between cells: Node hands a SIGINT to its watchdog thread, which acts
    # on it when it is scheduled; one sent in the last instant before a cell
    # may still interrupt that cell (documented: docs/python.md, contexts).
    # Here they are sent well before the next cell.
    time.sleep(0.5)
    assert agent.run(lang["use"])[:3] == ({"id": 1, "status": "ok", "exit_code": 0, "error": None}, "42\n", "")
    assert agent.proc.poll() is None


def test_sigint_storm_never_kills(agent, lang):
    """SIGINTs every 1-10 ms, at any moment of a cell's life and between
    cells: each cell ends (ok, or interrupted), the agent never dies (node's
    breakOnSigint used to leave SIGINT fatal as each run started and ended)."""
    agent.run(lang["set"])
    stop = threading.Event()

    def storm():
        while not stop.is_set():
            agent.proc.send_signal(signal.SIGINT)
            time.sleep(random.uniform(0.001, 0.01))

    cells = [lang["last"], lang["spin"], lang["use"], lang["sleep"], lang["stmt"]]
    if lang["name"] == "node":  # an awaited promise that resolves, and one in the run's own microtasks
        cells += ["Promise.resolve(7)", "new Promise((r) => setTimeout(r, 1))"]
    t = threading.Thread(target=storm)
    t.start()
    try:
        for i in range(300):
            agent.output()
            agent.send({"id": i, "code": cells[i % len(cells)]})
            r = agent.reply()  # EOF (raised) if the agent died
            assert r["id"] == i and r["status"] in ("ok", "interrupted"), r
    finally:
        stop.set()
        t.join()
    assert agent.run(lang["use"])[:3] == ({"id": 1, "status": "ok", "exit_code": 0, "error": None}, "42\n", "")
    assert agent.proc.poll() is None


def test_node_cell_sigint_listener_keeps_the_agent_safe():
    """A cell's process.on('SIGINT') gets the SIGINTs that come between
    cells, and neither makes SIGINT fatal nor stops the interrupt."""
    a = Agent(LANGS["node"]["argv"]())
    try:
        assert a.run("var got = 0; process.on('SIGINT', () => { got++ }); 1")[:2] == (OK, "1\n")
        for _ in range(3):
            r, out, err = a.interrupt(LANGS["node"]["spin"], "spin")
            assert r["status"] == "interrupted"
        end = time.monotonic() + WAIT
        while a.run("got > 0")[1] != "true\n":
            assert time.monotonic() < end, "the listener got no SIGINT"
            a.proc.send_signal(signal.SIGINT)
        assert a.run("got = 0; 5")[:2] == (OK, "5\n")
        assert a.proc.poll() is None
    finally:
        a.close()


def test_output_is_written_before_the_reply(agent, lang):
    r, out, err = agent.run(lang["big"])
    assert r["status"] == "ok"
    assert (out, err) == ("a" * 1000000, "b" * 1000000)


def test_children_do_not_get_the_channel(agent, lang):
    r, out, err = agent.run(lang["child_fd3"])
    assert (r["status"], out) == ("ok", "closed\n")


def test_eof_ends_with_0(agent, lang):
    agent.run(lang["set"])
    agent.sock.shutdown(socket.SHUT_WR)
    assert agent.exit_status() == 0


def test_frame_at_the_limit_is_taken(agent, lang):
    # The largest frame: a cell of one comment line.
    head = b'{"id": 5, "code": "' + (b"#" if lang["name"] == "python" else b"//")
    frame = head + b"x" * (LIMIT - len(head) - 2) + b'"}'
    agent.sock.sendall(struct.pack(">I", len(frame)) + frame)
    assert len(frame) == LIMIT
    assert agent.reply() == {"id": 5, "status": "ok", "exit_code": 0, "error": None}


@pytest.mark.parametrize("frame", [
    struct.pack(">I", LIMIT + 1),                      # over 16 MiB: refused before it is read
    struct.pack(">I", 0xFFFFFFFF),
    struct.pack(">I", 3) + b"{}x",                     # not JSON
    struct.pack(">I", 2) + b"\xff\xfe",                # not UTF-8
    struct.pack(">I", 2) + b"[]",                      # not an object
    struct.pack(">I", 13) + b'{"code": "1"}',          # no id
    struct.pack(">I", 22) + b'{"id": "1", "code": 1}', # wrong types
    struct.pack(">I", 10) + b'{"id"',                  # EOF inside a frame
], ids=["over", "max", "json", "utf8", "array", "noid", "types", "truncated"])
def test_bad_frame_ends_with_2(agent, frame):
    agent.sock.sendall(frame)
    if len(frame) == 9:  # the agent waits for the rest: the host's EOF ends it
        agent.sock.shutdown(socket.SHUT_WR)
    assert agent.exit_status() == 2  # the others by themselves, the channel open
    assert "nsbox context agent:" in agent.output()[1]


def test_python_what_a_cell_sees():
    a = Agent(LANGS["python"]["argv"]())
    try:
        r, out, err = a.run(
            "import sys, pickle\n"
            "class A: pass\n"
            "(sys.argv, __name__, sys.path[0], sys.modules['__main__'].__dict__ is globals(),\n"
            " type(pickle.loads(pickle.dumps(A()))) is A, '__file__' in globals())")
        assert (r["status"], out, err) == ("ok", "([''], '__main__', '', True, True, False)\n", "")
        # __future__ imports carry over to later cells, as in the REPL.
        a.run("from __future__ import annotations")
        assert a.run("def f(v: nowhere): pass\nf.__annotations__")[1] == "{'v': 'nowhere'}\n"
        # Tracebacks show the cell's source line.
        r, out, err = a.run("def g():\n    raise ValueError('deep')\n")
        r, out, err = a.run("g()")
        assert r["error"] == "ValueError: deep"
        assert "raise ValueError('deep')" in err and "<cell 4>" in err
        # sys.exit('text') prints the text, like the interpreter.
        r, out, err = a.run("raise SystemExit('bye')")
        assert (r["status"], r["exit_code"], err) == ("exit", 1, "bye\n")
    finally:
        a.close()


def test_node_what_a_cell_sees():
    a = Agent(LANGS["node"]["argv"]())
    try:
        r, out, err = a.run("[process.execArgv, typeof require, typeof __filename, typeof fs.readFileSync]")
        assert (r["status"], out, err) == ("ok", "[ [], 'function', 'undefined', 'function' ]\n", "")
        assert a.run("{a: 1}")[1] == "{ a: 1 }\n"                # an object, not a block
        assert a.run("let z = 5; z")[1] == "5\n"
        assert a.run("z + 1")[1] == "6\n"                        # let persists too
        # A promise is awaited; its callbacks' output comes before the reply.
        r, out, err = a.run("Promise.resolve().then(() => { console.log('tick'); return 42 })")
        assert (r["status"], out) == ("ok", "tick\n42\n")
        r, out, err = a.run("Promise.reject(new RangeError('no'))")
        assert (r["status"], r["error"]) == ("error", "RangeError: no")
        # A timer's exception after the cell's reply is shown, not fatal.
        assert a.run("setTimeout(() => { throw new Error('late') }, 0); 1")[:2] == (OK, "1\n")
        assert a.run("x = 1; x")[:2] == (OK, "1\n")
        assert a.proc.poll() is None
        # process.exit caught by the cell is the cell's business.
        assert a.run("try { process.exit(4) } catch (e) { 'caught' }")[1] == "'caught'\n"
    finally:
        a.close()


def test_rich_results(agent, lang):
    """The last expression and display() come back as MIME bundles
    (text/plain always; the object's own _repr_*_ where it has them)."""
    if lang["name"] == "python":
        code = ("class H:\n    def _repr_html_(self): return '<b>h</b>'\n    def _repr_png_(self): return b'\\x89PNG'\n"
                "display(H())\n{'k': [1, 2]}")
        agent.run(code)
        assert agent.results[0]["text/html"] == "<b>h</b>"
        assert agent.results[0]["image/png"] == "iVBORw=="   # base64 of b"\x89PNG"
        assert agent.results[1] == {"text/plain": "{'k': [1, 2]}"}
        # a cell's results are bounded (8 MiB); past that, one says so
        agent.run("class B:\n    def _repr_html_(self): return 'x' * (3 << 20)\nfor i in range(3): display(B())")
        assert [len(b.get("text/html", "")) for b in agent.results] == [3 << 20, 3 << 20, 0]
        assert "dropped" in agent.results[2]["text/plain"]
    else:
        agent.run("({k: [1, 2]})")
        assert agent.results == [{"text/plain": "{ k: [ 1, 2 ] }", "application/json": '{"k":[1,2]}'}]
    agent.run(lang["stmt"])
    assert agent.results == []
