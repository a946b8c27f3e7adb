"""A person at a terminal, for tests/func/terminal.test: a pseudo-terminal
whose master is the keyboard and the screen, and nsbox run on its slave.

  terminal_harness.py steal -- CMD...
      CMD's stdout and stderr are the terminal, stdin /dev/null (nsbox run
      without -i). Once CMD's output says "reading", "secret" is typed.
  terminal_harness.py session -- CMD...
      CMD is a session on the terminal (stdin, stdout, stderr, controlling
      terminal), 30x100. On "WINCH?" in the output the window becomes 40x120
      (and CMD gets SIGWINCH, as from a terminal emulator); on "INTR?" ^C is
      typed; on "TERM?" CMD gets SIGTERM; on "LINE?" "hello" is typed.
  terminal_harness.py fdpass WAIT -- CMD...
      CMD is a session on the terminal; once it ended, "secret" is typed,
      then WAIT (a shell command, not on the terminal) runs to its end.

Prints one JSON object: CMD's exit status, what the screen showed, whether
the terminal's modes after are the ones before, and what was typed but still
unread (nobody took it) at the end.
"""
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import fcntl
import time

mode = sys.argv[1]
rest = sys.argv[2:]
wait_cmd = None
if mode == "fdpass":
    wait_cmd, rest = rest[0], rest[1:]
assert rest[0] == "--"
cmd = rest[1:]

master, slave = os.openpty()
fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
before = termios.tcgetattr(slave)


def child_setup():
    if mode != "steal":
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)


if mode == "steal":
    stdin = open(os.devnull, "rb")
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=slave, stderr=slave, close_fds=True)
else:
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                            preexec_fn=child_setup)
screen = b""
done = set()
deadline = time.monotonic() + 60


def pump(until_exit=True):
    global screen
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            screen += data
        if mode == "steal" and b"reading" in screen and "typed" not in done:
            done.add("typed")
            os.write(master, b"secret\n")
        if mode == "session":
            if b"WINCH?" in screen and "winch" not in done:
                done.add("winch")
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
                proc.send_signal(signal.SIGWINCH)
            if b"INTR?" in screen and "intr" not in done:
                done.add("intr")
                os.write(master, b"\x03")
            if b"TERM?" in screen and "term" not in done:
                done.add("term")
                proc.send_signal(signal.SIGTERM)
            if b"LINE?" in screen and "line" not in done:
                done.add("line")
                os.write(master, b"hello\r")
        if until_exit and proc.poll() is not None and not r:
            return


pump()
if proc.poll() is None:
    proc.kill()
rc = proc.wait()
if mode == "fdpass":
    os.write(master, b"secret\n")
    subprocess.run(["sh", "-c", wait_cmd], timeout=120)
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            screen += os.read(master, 65536)
after = termios.tcgetattr(slave)
# What was typed and nobody read: still in the terminal's input queue (a
# whole line, readable at once in canonical mode).
left = b""
fl = fcntl.fcntl(slave, fcntl.F_GETFL)
fcntl.fcntl(slave, fcntl.F_SETFL, fl | os.O_NONBLOCK)
try:
    left = os.read(slave, 4096)
except OSError:
    pass
print(json.dumps({"rc": rc, "screen": screen.decode("utf-8", "replace"),
                  "modes_kept": before == after, "echo": bool(after[3] & termios.ECHO),
                  "unread": left.decode("utf-8", "replace")}))
