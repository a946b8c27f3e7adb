"""Run every example of the README, docs/*.md and the man pages (docs.test).

Each fenced block (markdown) or .nf/.EX block (man) is one of:
- marked output (`<!-- example: output -->` before the fence, `.\\" example:
  output` before .nf): a record, an error message, a diagram; not run;
- marked skipped with a reason (`<!-- example: skip REASON -->`), printed;
- shell (```sh, or unlabelled and starting with a command): each command
  line runs with bash in a scratch directory of fixtures, in order, and must
  exit 0 (or the status SKIP_LINES/EXPECT give); lines that need the network,
  another host or Docker are skipped by the table below, with the reason;
- python: run whole in a fresh interpreter with nsbox importable; a block
  that defines `async def main()` (no parameters) has it run;
- yaml: a policy (`nsbox policy show --policy`) or, in nsbox-seccomp(5), a
  seccomp profile (`nsbox run --seccomp FILE`);
- json: parsed (the MCP client configuration).
An unclassified block fails: a new example must run or say why not.
Prints TAP-like lines; exit 0 when nothing failed.

Fixtures (the stand-ins for the reader's own files): ./rootfs (the suite's
busybox root filesystem with stand-in scripts build.sh, long-job, app,
needs-the-network, make, python3), ./script.py, ./policies (the shipped
ones), ~/src/project (a checkout with a Makefile), exported.tar (a flat tar
of a tiny root filesystem), and the default image for the Python and Node
examples (skipped with the reason when it is not built). docs.test runs this
as an unprivileged user, so images it imports go to that user's private store
under the scratch HOME, never the shared one.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

TOP = os.environ["top_srcdir"]
T = os.environ["T"]
ROOTFS = os.environ["ROOTFS"]
NSBOX_DIR = os.path.dirname(os.environ["NSBOX"])
HAVE_DEFAULT = os.environ.get("HAVE_DEFAULT") == "1"
HAVE_CGROUP = os.environ.get("HAVE_CGROUP") == "1"
# What needs a cgroup (a fractional --cpus): refused without one (README, Limits).
NEEDS_CGROUP = r"--cpus 0\.[0-9]|cpus=0\.[0-9]"
PYTHONPATH = os.environ.get("DOCS_PYTHONPATH", "")

# (pattern on a command line, reason): lines not run here.
SKIP_LINES = [
    (r"^docker (save|build|create|export)|docker-export\.sh", "needs a Docker engine (none on this machine)"),
    (r"docker-default\.json", "needs Docker's own seccomp profile file (tests/func/scale-docs.test loads one)"),
    (r"--network (user|host)", "reaches the network"),
    (r"--policy deps .*pip install|--allow-host registry\.npmjs\.org", "installs from a package index (the network)"),
    (r"redis://queue|celery -A", "needs another host (the Redis queue and Celery workers)"),
    (r">>\s*/etc/sub[ug]id", "changes the host's /etc/subuid and /etc/subgid"),
    (r"^hyperfine|^R=", "a benchmark recipe (bench/ runs the measured one)"),
    (r"--audit-log /var/log/", "writes into the host's /var/log (the audit tests use private files)"),
    (r"^make |^\./configure|^\./autogen\.sh|^sudo make", "builds this tree (the suite itself does)"),
    (r"^\./quickstart\.sh", "sets up the machine (apt-get, make install)"),
    (r"pip install --no-build-isolation \./python|python3 -m venv|~/venv-nsbox/bin/python",
     "the venv install: python.test runs it, offline"),
    (r"nsbox image build", "builds an image (debootstrap, apt or pip: the network; quickstart builds the default)"),
    (r"nsbox image pull", "pulls from a registry (the network)"),
    (r"^PKG_CONFIG_PATH=", "needs nsbox installed under a private prefix"),
]
# Lines that fail on purpose, with the status they must give.
EXPECT = {}
# Lines with a stand-in environment (the examples' own project files).
LINE_ENV = [
    (r"\bmake\b|\./configure", {"NSBOX_ROOTFS": "./rootfs"}),
]
DEFAULT_IMAGE_LINE = r"run-code --lang (python|node)|--lang python|python3 -c|--image default|nsbox start|exec work|" \
                     r"--trust|--block-import|--artifacts|run-code --json|--lang bash|nsbox run -- "

results = {"pass": 0, "fail": 0}


def ok(what):
    results["pass"] += 1
    print("ok - " + what)


def bad(what, detail=""):
    results["fail"] += 1
    print("not ok - " + what)
    for line in detail.splitlines()[-25:]:
        print("#   " + line)


def note(what):
    print("# " + what)


# ---- collecting -------------------------------------------------------------

def markdown_blocks(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    i, out = 0, []
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        mark = re.match(r"^<!-- example: (\w+)\s*(.*?)\s*-->$", prev.strip())
        mark = (mark.group(1), mark.group(2)) if mark else None
        # The Python of a "Stateful sandboxes" section runs in
        # python/tests/test_examples.py, with `live` a started sandbox.
        section = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].startswith("## ")), "")
        if lang == "python" and section.startswith("## Stateful sandboxes") and not mark:
            mark = ("skip", "runs in python/tests/test_examples.py, with `live` a started sandbox")
        out.append(("%s:%d" % (os.path.relpath(path, TOP), start + 1), lang, lines[start + 1:j], mark))
        i = j + 1
    return out


def man_blocks(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i] in (".nf", ".EX"):
            start, j = i, i + 1
            while j < len(lines) and lines[j] not in (".fi", ".EE"):
                j += 1
            body = [l.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")
                    for l in lines[start + 1:j] if l not in (".RS", ".RE")]
            prev = lines[start - 1] if start else ""
            mark = re.match(r'^\.\\" example: (\w+)\s*(.*)$', prev)
            lang = "yaml" if path.endswith(".5") else ""
            out.append(("%s:%d" % (os.path.relpath(path, TOP), start + 1), lang, body,
                        (mark.group(1), mark.group(2).strip()) if mark else None))
            i = j + 1
        else:
            i += 1
    return out


# ---- fixtures ---------------------------------------------------------------

SCRATCH = os.path.join(T, "docs-scratch")
HOME = os.path.join(T, "docs-home")
BIN = os.path.join(SCRATCH, ".bin")   # nsbox, and nsbox-docker as make install links it


MADE = []


def cleanup():
    """Stop what the examples left running (all in the scratch HOME's
    private state) and remove what was made outside the scratch tree."""
    env = env_for("")
    p = subprocess.run(["nsbox", "docker", "ps", "-aq"], env=env, capture_output=True, text=True)
    for c in p.stdout.split():
        subprocess.run(["nsbox", "docker", "rm", "-f", c], env=env, capture_output=True)
    p = subprocess.run(["nsbox", "ps"], env=env, capture_output=True, text=True)
    for line in p.stdout.splitlines()[1:]:
        if line.split():
            subprocess.run(["nsbox", "stop", line.split()[0]], env=env, capture_output=True)
    for f in MADE:
        os.unlink(f)


def fixtures():
    for d in (SCRATCH, HOME):
        os.makedirs(d, exist_ok=True)
    root = os.path.join(SCRATCH, "rootfs")
    shutil.copytree(ROOTFS, root, symlinks=True)
    stub = "#!/bin/sh\necho \"$(basename \"$0\") $*: done\"\n"
    for name in ("build.sh", "long-job", "app", "needs-the-network", "bin/make", "bin/python3", "bin/bash"):
        p = os.path.join(root, name)
        with open(p, "w") as f:
            f.write(stub)
        os.chmod(p, 0o755)
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    os.makedirs(os.path.join(root, "workspace"), exist_ok=True)
    with open(os.path.join(SCRATCH, "script.py"), "w") as f:
        f.write("print(6 * 7)\n")
    with open(os.path.join(SCRATCH, "untrusted.py"), "w") as f:
        f.write("print('untrusted')\n")
    os.makedirs(os.path.join(SCRATCH, "src"))
    shutil.copytree(os.path.join(TOP, "policies"), os.path.join(SCRATCH, "policies"))
    proj = os.path.join(HOME, "src", "project")
    os.makedirs(proj)
    with open(os.path.join(proj, "Makefile"), "w") as f:
        f.write("test:\n\techo ok\n")
    with open(os.path.join(proj, "configure"), "w") as f:
        f.write("#!/bin/sh\necho configured\n")
    os.chmod(os.path.join(proj, "configure"), 0o755)
    with open(os.path.join(SCRATCH, "requirements.txt"), "w") as f:
        f.write("")
    with open(os.path.join(SCRATCH, "tool.py"), "w") as f:
        f.write("open('out.txt', 'w').write('tool ran')\n")
    # a flat tar of a tiny root filesystem (docker export's shape)
    with tarfile.open(os.path.join(SCRATCH, "exported.tar"), "w") as t:
        t.add(ROOTFS, arcname=".")
    # this directory as a project under git: configure, make, commit
    with open(os.path.join(SCRATCH, "configure"), "w") as f:
        f.write("#!/bin/sh\necho configured\n")
    os.chmod(os.path.join(SCRATCH, "configure"), 0o755)
    with open(os.path.join(SCRATCH, "Makefile"), "w") as f:
        f.write("all:\n\techo built >>build.log\n")
    with open(os.path.join(SCRATCH, "build.log"), "w") as f:
        f.write("")
    with open(os.path.join(HOME, ".gitconfig"), "w") as f:
        f.write("[user]\n\tname = docs test\n\temail = docs@test.invalid\n[safe]\n\tdirectory = *\n")
    git = ["git", "-C", SCRATCH]
    subprocess.run(git + ["init", "-q"], check=True, env=dict(os.environ, HOME=HOME))
    # the identity in the repository itself: the sandbox has a HOME of its own
    subprocess.run(git + ["config", "user.name", "docs test"], check=True, env=dict(os.environ, HOME=HOME))
    subprocess.run(git + ["config", "user.email", "docs@test.invalid"], check=True, env=dict(os.environ, HOME=HOME))
    subprocess.run(git + ["add", "configure", "Makefile", "build.log"], check=True, env=dict(os.environ, HOME=HOME))
    subprocess.run(git + ["commit", "-qm", "start"], check=True, env=dict(os.environ, HOME=HOME))
    os.makedirs(BIN)
    os.symlink(os.environ["NSBOX"], os.path.join(BIN, "nsbox"))
    os.symlink(os.environ["NSBOX"], os.path.join(BIN, "nsbox-docker"))
    with open(os.path.join(SCRATCH, "x.py"), "w") as f:
        f.write("print('x')\n")
    if not os.path.exists("/tmp/x.py"):   # the examples' own path; removed at the end
        shutil.copy(os.path.join(SCRATCH, "x.py"), "/tmp/x.py")
        os.chmod("/tmp/x.py", 0o644)
        MADE.append("/tmp/x.py")
    with open(os.path.join(SCRATCH, "mypolicy.yaml"), "w") as f:
        f.write("limits: { memory: 256m, timeout: 30s }\n")
    os.system("chmod -R a+rX '%s' '%s'" % (SCRATCH, HOME))


def env_for(line):
    env = dict(os.environ)
    env.update(HOME=HOME, PATH="%s/bin:%s:/usr/bin:/bin:/usr/sbin:/sbin" % (HOME, BIN), NSBOX_QUIET="1",
               PYTHONPATH=PYTHONPATH)
    for pat, extra in LINE_ENV:
        if re.search(pat, line):
            env.update({k: os.path.join(SCRATCH, v[2:]) if v.startswith("./") else v for k, v in extra.items()})
    return env


# ---- running ----------------------------------------------------------------

PRELUDE = "sudo() { \"$@\"; }\n"   # what needs root is skipped above


def shell_lines(body):
    out, cur = [], ""
    for l in body:
        if cur:
            cur += "\n" + l
        elif l.strip().startswith("#") or not l.strip():
            continue
        else:
            cur = l
        if not cur.rstrip().endswith("\\"):
            out.append(cur)
            cur = ""
    return out


def run_shell(where, body):
    for line in shell_lines(body):
        cmd = re.sub(r"\s+#.*$", "", line, flags=re.M)   # the commands, not their comments
        skip = next((why for pat, why in SKIP_LINES if re.search(pat, cmd)), None)
        short = line.split("\n")[0][:90]
        if skip:
            note("SKIP %s: %s (%s)" % (where, short, skip))
            continue
        if not HAVE_CGROUP and re.search(NEEDS_CGROUP, cmd):
            note("SKIP %s: %s (a fractional --cpus needs a cgroup; this identity has none)" % (where, short))
            continue
        if not HAVE_DEFAULT and re.search(DEFAULT_IMAGE_LINE, line) and "--rootfs" not in line:
            note("SKIP %s: %s (the default image is not built here)" % (where, short))
            continue
        # An interactive shell (-it) gets what a person would type to leave it.
        typed = "exit\n" if re.search(r"\s-it\s", line) else None
        p = subprocess.run(["bash", "-c", PRELUDE + line], cwd=SCRATCH, env=env_for(line), capture_output=True,
                           text=True, timeout=300, input=typed,
                           **({} if typed is not None else {"stdin": subprocess.DEVNULL}))
        want = EXPECT.get(line.strip(), 0)
        if p.returncode == want:
            ok("%s: %s" % (where, short))
        else:
            bad("%s: %s (exit %d, expected %d)" % (where, short, p.returncode, want), p.stdout + p.stderr)


def run_python(where, body):
    code = "\n".join(body)
    if not PYTHONPATH:
        note("SKIP %s: the Python package could not be built here" % where)
        return
    if not HAVE_CGROUP and re.search(NEEDS_CGROUP, code):
        note("SKIP %s: a fractional cpus needs a cgroup; this identity has none" % where)
        return
    if not HAVE_DEFAULT and ("Sandbox(" in code or "run_code" in code):
        note("SKIP %s: the default image is not built here" % where)
        return
    prog = ("import asyncio, inspect, nsbox\n" + code +
            "\nif inspect.iscoroutinefunction(globals().get('main')) and "
            "not inspect.signature(main).parameters:\n    asyncio.run(main())\n")
    p = subprocess.run([os.environ.get("PY", "/usr/bin/python3"), "-c", prog], cwd=SCRATCH, env=env_for(code),
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if p.returncode == 0:
        ok("%s: the Python example runs" % where)
    else:
        bad("%s: the Python example runs" % where, p.stdout + p.stderr)


def run_yaml(where, body, seccomp):
    path = os.path.join(SCRATCH, "example.yaml")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")
    if seccomp:
        argv = ["nsbox", "run", "--seccomp", path, "--rootfs", "rootfs", "--", "true"]
        okay = lambda p: p.returncode in (0, 159, 137) or "seccomp" not in p.stderr   # loads; the filter may kill true
    else:
        argv = ["nsbox", "policy", "show", "--policy", path]
        okay = lambda p: p.returncode == 0
    p = subprocess.run(argv, cwd=SCRATCH, env=env_for(""), capture_output=True, text=True, timeout=60)
    if okay(p):
        ok("%s: the %s example is accepted" % (where, "seccomp profile" if seccomp else "policy"))
    else:
        bad("%s: the %s example is accepted" % (where, "seccomp profile" if seccomp else "policy"), p.stderr)


COMMANDS = re.compile(r"^(sudo |nsbox|echo |mkdir |\./|rootfs/|python3 |docker |NSBOX_|celery |R=|hyperfine|"
                      r"PKG_CONFIG_PATH|~/venv|make|\$ )")


def main():
    try:
        fixtures()
    except BaseException:
        cleanup()
        raise
    blocks = []
    docs = [os.path.join(TOP, "README.md")] + sorted(
        os.path.join(TOP, "docs", f) for f in os.listdir(os.path.join(TOP, "docs")) if f.endswith(".md"))
    for d in docs:
        blocks += markdown_blocks(d)
    for m in sorted(os.listdir(os.path.join(TOP, "man"))):
        if re.match(r".*\.[1-8]$", m):
            blocks += man_blocks(os.path.join(TOP, "man", m))
    for where, lang, body, mark in blocks:
        first = next((l for l in body if l.strip() and not l.strip().startswith("#")), "")
        if mark and mark[0] == "output":
            continue
        if mark and mark[0] == "skip":
            note("SKIP %s: %s" % (where, mark[1] or "no reason given"))
            if not mark[1]:
                bad("%s: a skipped example says why" % where)
            continue
        if lang == "python":
            run_python(where, body)
        elif lang == "yaml":
            run_yaml(where, body, seccomp="nsbox-seccomp" in where or "seccomp/" in first)
        elif lang == "json":
            try:
                json.loads("\n".join(body))
                ok("%s: the JSON example parses" % where)
            except ValueError as e:
                bad("%s: the JSON example parses" % where, str(e))
        elif lang in ("sh", "bash", "") and COMMANDS.match(first.strip()):
            run_shell(where, body)
        elif lang == "" and first.strip().startswith("{") and where.startswith("man/"):
            try:
                json.loads("\n".join(body))
                ok("%s: the JSON example parses" % where)
            except ValueError as e:
                bad("%s: the JSON example parses" % where, str(e))
        else:
            bad("%s: an example that is neither run nor marked (<!-- example: output --> or skip REASON)" % where,
                "\n".join(body[:5]))
    cleanup()
    print("%d passed, %d failed" % (results["pass"], results["fail"]))
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
