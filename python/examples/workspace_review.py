#!/usr/bin/env python3
"""Workspace review: run `make test` (or any command) on a checkout in a
sandbox whose writes are captured, show what it changed as a diff, and write
the changes back only when approved.

    python3 examples/workspace_review.py ~/src/project
    python3 examples/workspace_review.py ~/src/project --command 'make fmt' --yes
"""
import argparse
import os
import sys
import uuid

import nsbox


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkout")
    ap.add_argument("--command", default="make test")
    ap.add_argument("--rootfs")
    ap.add_argument("--yes", action="store_true", help="apply without asking")
    a = ap.parse_args()
    name = "review-" + uuid.uuid4().hex[:8]
    kw = dict(workspace=os.path.abspath(a.checkout), session=name, memory="1g", timeout="10m",
              pids=256, workdir="/workspace")
    sb = nsbox.Sandbox(rootfs=a.rootfs, **kw) if a.rootfs else nsbox.Sandbox(**kw)
    print("$ %s" % a.command)
    r = sb.run(a.command, on_stdout=lambda t: print(t, end="", flush=True),
               on_stderr=lambda t: print(t, end="", file=sys.stderr, flush=True))
    print("\n[%s]" % r.reason())
    session = nsbox.Session(name)
    changes = session.changes()
    if not changes:
        print("no changes")
        session.discard()
        return
    print("\n%d change(s):" % len(changes))
    for c in changes:
        print("  " + str(c))
    print()
    # A patch (`patch -p1` applies it); escaped when shown on a terminal.
    print(session.diff(escape=sys.stdout.isatty()))
    if any(c.denied for c in changes):
        print("some changes are denied by the policy (workspace.deny_changes): not applying")
        session.discard()
        return
    answer = "y" if a.yes else input("apply these changes to %s? [y/N] " % a.checkout)
    if answer.strip().lower() == "y":
        try:
            session.apply()   # the session goes once applied
            print("applied")
            return
        except nsbox.SandboxError as e:
            print("refused: %s" % e)
    session.discard()


if __name__ == "__main__":
    main()
