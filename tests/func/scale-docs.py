#!/usr/bin/python3
"""The recipes of docs/scale.md, checked as far as one machine allows (run by
scale-docs.test). usage: scale-docs.py SRCDIR NSBOX ROOTFS TMPDIR

- the pod seccomp profile: valid, denies none of the system calls nsbox
  makes (taken from its sources) nor any its own sandbox filter allows, and
  under it (applied with libseccomp, when python3-seccomp is there) `nsbox
  check` says a run works and a sandbox runs;
- the Kubernetes manifest: valid against the Kubernetes API schema
  (k8s_schema.py, python3-kubernetes), the Baseline controls it breaks are
  the ones it names, the settings nsbox needs in a pod, its policy accepted
  by `nsbox policy show`;
- oci.conf and nsbox-oci: the keys Slurm knows, and a bundle run, queried,
  killed and deleted through nsbox.
"""
import glob
import json
import os
import re
import subprocess
import sys
import time

SRC, NSBOX, ROOTFS, T = sys.argv[1:5]
D = os.path.join(SRC, "docs", "scale")
failed = 0


def ok(what, cond, detail=""):
    global failed
    print("%s - %s%s" % ("ok" if cond else "not ok", what, "" if cond or not detail else ": %s" % (detail,)),
          flush=True)
    failed += not cond
    return cond


# ---- seccomp -----------------------------------------------------------------
prof = json.load(open(os.path.join(D, "seccomp-nsbox-worker.json")))
ACTIONS = {"SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD",
           "SCMP_ACT_TRAP", "SCMP_ACT_TRACE", "SCMP_ACT_LOG"}
ok("seccomp: defaultAction and every rule's action are seccomp actions",
   prof.get("defaultAction") in ACTIONS and all(r.get("action") in ACTIONS for r in prof.get("syscalls", [])))
ok("seccomp: every rule names system calls",
   all(isinstance(r.get("names"), list) and r["names"] and all(isinstance(n, str) for n in r["names"])
       for r in prof.get("syscalls", [])))
denied = {n for r in prof["syscalls"] if r["action"] != "SCMP_ACT_ALLOW" and not r.get("args") for n in r["names"]}
allowed = {n for r in prof["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]}

# What nsbox calls: raw syscall numbers in its sources, and the libc wrappers
# of the namespace and mount calls (those a runtime's default profile gates).
used = set()
for f in glob.glob(os.path.join(SRC, "src", "lib", "**", "*.[ch]"), recursive=True) + glob.glob(os.path.join(SRC, "src", "cli", "**", "*.c"), recursive=True):
    text = open(f, errors="replace").read()
    used |= set(re.findall(r"\b(?:SYS|__NR)_([a-z0-9_]+)", text))
    used |= set(re.findall(r"\b(unshare|setns|mount|umount2|pivot_root|sethostname|clone|prctl|seccomp|"
                           r"mount_setattr|open_tree|move_mount|openat2|pidfd_open|memfd_create)\(", text))
need = {"clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
        "mount_setattr", "sethostname", "seccomp", "prctl"}
ok("seccomp: the sources name the namespace calls this test expects (%d found)" % len(used), need <= used,
   sorted(need - used))
if prof["defaultAction"] == "SCMP_ACT_ALLOW":
    bad = sorted(used & denied)
else:
    bad = sorted(used - allowed)
ok("seccomp: no system call nsbox makes is denied", not bad, bad)

# Nor anything nsbox's own sandbox filter gives the payload: the pod's
# profile applies to the sandboxes too.
inner = open(os.path.join(SRC, "seccomp", "default.yaml")).read()
allow_part = inner.split("\nallow:", 1)[1].split("\ndeny:", 1)[0] if "\nallow:" in inner else ""
inner_allowed = set(re.findall(r"\b([a-z_][a-z0-9_]*)\b", re.sub(r"#.*", "", allow_part)))
clash = sorted(inner_allowed & denied)
ok("seccomp: no system call nsbox's default sandbox profile allows is denied by the pod's", not clash, clash)
host_global = {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
               "open_by_handle_at", "reboot", "swapon", "swapoff", "perf_event_open", "settimeofday",
               "clock_settime", "keyctl", "add_key", "request_key"}
ok("seccomp: the calls on the node's global state are denied", host_global <= denied, sorted(host_global - denied))

try:
    import seccomp as libseccomp
    have_seccomp = hasattr(libseccomp, "SyscallFilter")
except ImportError:
    have_seccomp = False
if not have_seccomp:
    print("skip - applying the profile: python3-seccomp is not installed")
else:
    # Under the profile (as a runtime would apply it): check and a run.
    def child():
        act = {"SCMP_ACT_ALLOW": libseccomp.ALLOW, "SCMP_ACT_LOG": libseccomp.LOG}
        f = libseccomp.SyscallFilter(act.get(prof["defaultAction"], libseccomp.ERRNO(1)))
        for r in prof["syscalls"]:
            a = libseccomp.ALLOW if r["action"] == "SCMP_ACT_ALLOW" else libseccomp.ERRNO(r.get("errnoRet", 1))
            for n in r["names"]:
                try:
                    f.add_rule(a, n)
                except (RuntimeError, ValueError, OSError):
                    pass   # not a call of this architecture
        f.load()

    check = subprocess.run([NSBOX, "check", "--json"], preexec_fn=child, capture_output=True, text=True)
    try:
        rep = json.loads(check.stdout)
    except ValueError:
        rep = {}
    ok("seccomp applied: `nsbox check` says a default run works", rep.get("default_run_works") is True or
       all(i["status"] == "ok" for i in rep.get("items", []) if i.get("required") and i["name"] != "default image"),
       check.stdout[-800:] + check.stderr[-400:])
    run = subprocess.run([NSBOX, "run", "--rootfs", ROOTFS, "--", "sh", "-c", "echo $((6*7))"], preexec_fn=child,
                         capture_output=True, text=True)
    ok("seccomp applied: a sandbox runs", run.returncode == 0 and run.stdout == "42\n", run.stderr[-400:])

# ---- Kubernetes --------------------------------------------------------------
try:
    import yaml
except ImportError:
    yaml = None
    print("skip - the Kubernetes manifest: python3-yaml is not installed")
if yaml:
    docs = list(yaml.safe_load_all(open(os.path.join(D, "k8s-worker.yaml"))))
    kinds = {d["kind"]: d for d in docs if d}
    ok("k8s: the manifest parses into a Namespace, a ConfigMap and a Deployment",
       set(kinds) == {"Namespace", "ConfigMap", "Deployment"}, list(kinds))
    try:
        import k8s_schema
    except ImportError as e:
        k8s_schema = None
        print("skip - the Kubernetes API schema: python3-kubernetes is not installed (%s)" % e)
    if k8s_schema:
        import copy
        for d in docs:
            errs = k8s_schema.validate_document(d)
            ok("k8s: the %s is valid against the Kubernetes API schema (python3-kubernetes %s)"
               % (d["kind"], k8s_schema.client.__version__ if hasattr(k8s_schema.client, "__version__") else ""),
               not errs, errs)
        # The check catches what a typo would break (so it can fail).
        bad = copy.deepcopy(kinds["Deployment"])
        bpod = bad["spec"]["template"]["spec"]
        bpod["hostUser"] = bpod.pop("hostUsers")
        bpod["containers"][0]["securityContext"]["procMount"] = "unmasked"
        del bpod["containers"][0]["name"]
        errs = k8s_schema.validate_document(bad)
        ok("k8s: ...and a misspelt field, a wrong enum value and a missing required field are caught (%d)"
           % len(errs), len(errs) == 3, errs)
        viol = k8s_schema.baseline_violations(kinds["Deployment"]["spec"]["template"]["spec"])
        controls = sorted({c for c, _ in viol})
        ok("k8s: the pod breaks exactly the Baseline controls the manifest names (%s)" % ", ".join(controls),
           controls == ["/proc mount type", "AppArmor", "hostPath volumes"], viol)
        labels = kinds["Namespace"]["metadata"].get("labels", {})
        ok("k8s: ...so its namespace enforces the privileged level, and says so",
           labels.get("pod-security.kubernetes.io/enforce") == "privileged" and
           all(d["metadata"].get("namespace") == kinds["Namespace"]["metadata"]["name"]
               for d in docs if d and d["kind"] != "Namespace"))
    dep, cm = kinds["Deployment"], kinds["ConfigMap"]
    pod = dep["spec"]["template"]["spec"]
    ok("k8s: the pod has a user namespace (hostUsers: false)", pod.get("hostUsers") is False)
    ok("k8s: the selector matches the pod's labels",
       dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items())
    all_c = pod.get("initContainers", []) + pod["containers"]
    for c in all_c:
        sc = c.get("securityContext") or {}
        sp = sc.get("seccompProfile") or {}
        ok("k8s %s: procMount Unmasked (a fresh /proc in the sandbox's pid namespace)" % c["name"],
           sc.get("procMount") == "Unmasked")
        ok("k8s %s: the seccomp profile is this directory's" % c["name"],
           sp.get("type") == "Localhost" and os.path.basename(sp.get("localhostProfile", "")) ==
           "seccomp-nsbox-worker.json")
        ok("k8s %s: an AppArmor profile that allows mounts is set" % c["name"],
           (sc.get("appArmorProfile") or {}).get("type") in ("Unconfined", "Localhost"))
        ok("k8s %s: no privilege escalation, no capabilities" % c["name"],
           sc.get("allowPrivilegeEscalation") is False and (sc.get("capabilities") or {}).get("drop") == ["ALL"])
    w = pod["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in w["env"]}
    ok("k8s: the worker runs nsbox.celery (python3 -m celery: python3-celery has no celery command)",
       w["command"][:6] == ["python3", "-m", "celery", "-A", "nsbox.celery", "worker"])
    init = pod.get("initContainers", [{}])[0]
    isc = init.get("securityContext") or {}
    ok("k8s: the image-cache init container runs as uid 0 of the pod's user namespace (the hostPath is root's)",
       pod.get("hostUsers") is False and isc.get("runAsUser") == 0 and isc.get("runAsNonRoot") is False)
    ok("k8s: broker and backend are configured", "NSBOX_CELERY_BROKER" in env and "NSBOX_CELERY_BACKEND" in env)
    nonroot = pod.get("securityContext", {}).get("runAsNonRoot") or pod.get("securityContext", {}).get("runAsUser")
    ok("k8s: a non-root worker maps one id per sandbox (the pod has 65536)",
       not nonroot or env.get("NSBOX_SINGLE_IDMAP") == "1")
    # The policy: from the ConfigMap mounted where NSBOX_CELERY_POLICY points.
    mounts = {m["name"]: m["mountPath"] for m in w["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    pol_path = env.get("NSBOX_CELERY_POLICY", "")
    src = [(n, p) for n, p in mounts.items() if pol_path.startswith(p.rstrip("/") + "/")
           and vols[n].get("configMap", {}).get("name") == cm["metadata"]["name"]]
    key = pol_path[len(src[0][1].rstrip("/")) + 1:] if src else None
    ok("k8s: NSBOX_CELERY_POLICY is the ConfigMap's %s" % key, bool(src) and key in cm["data"])
    if src and key in cm["data"]:
        pf = os.path.join(T, "worker.yaml")
        with open(pf, "w") as f:
            f.write(cm["data"][key])
        show = subprocess.run([NSBOX, "policy", "show", "--policy", pf], capture_output=True, text=True)
        ok("k8s: nsbox accepts the worker's policy", show.returncode == 0, show.stderr)
        eff = yaml.safe_load(show.stdout) or {}
        lim = eff.get("limits", {})

        def size(s):
            m = re.fullmatch(r"(\d+)([kmg]?)", str(s).lower())
            return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)]

        def mi(s):
            m = re.fullmatch(r"(\d+)(Mi|Gi)", s)
            return int(m.group(1)) << (20 if m.group(2) == "Mi" else 30)

        def secs(s):
            m = re.fullmatch(r"(\d+)(ms|s|m|h)?", str(s))
            return int(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]
        conc = int(env.get("NSBOX_CELERY_CONCURRENCY", "1"))
        ok("k8s: the pod's memory limit holds its concurrency times the policy's memory",
           mi(w["resources"]["limits"]["memory"]) >= conc * size(lim.get("memory", "512m")))
        vis = int(env.get("NSBOX_CELERY_VISIBILITY_TIMEOUT", "3600"))
        ok("k8s: the queue's visibility timeout (%ds) exceeds the longest task (%s)" % (vis, lim.get("timeout")),
           vis > secs(lim.get("timeout", "60s")))
        ok("k8s: the grace period lets a running task finish",
           pod.get("terminationGracePeriodSeconds", 30) > secs(lim.get("timeout", "60s")))
    ok("k8s: the image cache is a node-local directory, read-only in the worker",
       vols["images"].get("hostPath") is not None and
       any(m["name"] == "images" and m.get("readOnly") for m in w["volumeMounts"]))

# ---- Slurm -------------------------------------------------------------------
KNOWN = {"containerpath", "createenvfile", "debugflags", "disablecleanup", "disablehooks", "envexclude",
         "mountspooldir", "runtimecreate", "runtimedelete", "runtimekill", "runtimeenvexclude", "runtimequery",
         "runtimerun", "runtimestart", "srunpath", "srunargs", "stdiodebug", "syslogdebug", "filedebug",
         "ignorefileconfigjson"}
conf = {}
for ln in open(os.path.join(D, "oci.conf")):
    ln = ln.split("#", 1)[0].strip()
    if ln:
        k, v = ln.split("=", 1)
        conf[k.lower()] = v.strip().strip('"')
ok("slurm: oci.conf has only keys Slurm knows", set(conf) <= KNOWN, sorted(set(conf) - KNOWN))
ok("slurm: RunTimeRun, not RunTimeCreate/RunTimeStart (one or the other)",
   "runtimerun" in conf and "runtimecreate" not in conf and "runtimestart" not in conf)
verbs = {k: next((w for w in v.split() if w in ("run", "state", "kill", "delete")), "")
         for k, v in conf.items() if k.startswith("runtime")}
ok("slurm: every run-time command is nsbox-oci with its verb",
   all(os.path.basename(conf[k].split()[0]) == "nsbox-oci" for k in verbs) and
   verbs == {"runtimequery": "state", "runtimekill": "kill", "runtimedelete": "delete", "runtimerun": "run"},
   verbs)

oci = os.path.join(D, "nsbox-oci")
bundle = os.path.join(T, "bundle")
os.makedirs(bundle)
os.symlink(ROOTFS, os.path.join(bundle, "rootfs"))
env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(T, "run"), NSBOX_OCI_NSBOX=NSBOX)
os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)


def bundle_cfg(args):
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump({"ociVersion": "1.0.2", "root": {"path": "rootfs"},
                   "process": {"args": args, "env": ["FOO=bar", "PATH=/bin"], "cwd": "/tmp"},
                   "mounts": [{"destination": "/host", "source": "/", "type": "bind", "options": ["rbind"]}]}, f)


def oci_run(*a, **kw):
    return subprocess.run([oci, *a], env=env, capture_output=True, text=True, **kw)


bundle_cfg(["sh", "-c", "echo $FOO; pwd; ls /host 2>&1 | head -1"])
r = oci_run("run", "--bundle", bundle, "n1.u.1.0.0")
ok("slurm: a bundle runs in nsbox with its args, env and cwd (and none of its mounts)",
   r.returncode == 0 and r.stdout.startswith("bar\n/tmp\n") and "No such file" in r.stdout, (r.stdout, r.stderr))
ok("slurm: its state is 'stopped' after it ran",
   json.loads(oci_run("state", "n1.u.1.0.0").stdout or "{}").get("status") == "stopped")
ok("slurm: delete forgets it", oci_run("delete", "--force", "n1.u.1.0.0").returncode == 0 and
   oci_run("state", "n1.u.1.0.0").returncode != 0)

bundle_cfg(["sleep", "60"])
p = subprocess.Popen([oci, "run", "--bundle", bundle, "n1.u.2.0.0"], env=env, stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
st = {}
for _ in range(100):
    st = json.loads(oci_run("state", "n1.u.2.0.0").stdout or "{}")
    if st.get("status") == "running":
        break
    time.sleep(0.1)
ok("slurm: a running bundle's state is 'running' with nsbox's pid", st.get("status") == "running" and
   st.get("pid") == p.pid, st)
oci_run("kill", "-a", "n1.u.2.0.0")
try:
    rc = p.wait(60)
except subprocess.TimeoutExpired:
    p.kill()
    rc = p.wait()
ok("slurm: kill (SIGTERM) ends the run", rc != 0 and rc is not None, rc)
ok("slurm: ...and its state is 'stopped'",
   json.loads(oci_run("state", "n1.u.2.0.0").stdout or "{}").get("status") == "stopped")
oci_run("delete", "n1.u.2.0.0")
ok("slurm: a hostile container id is refused", oci_run("state", "../../etc/passwd").returncode == 125)

# A batch step: no XDG_RUNTIME_DIR, no /run/user/UID. A precise error, not a traceback.
bare = {k: v for k, v in env.items() if k != "XDG_RUNTIME_DIR"}
r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", oci, "state", "n1.u.3.0.0"],
                   env=bare, capture_output=True, text=True) if os.getuid() == 0 else \
    subprocess.run([oci, "state", "n1.u.3.0.0"], env=dict(bare, XDG_RUNTIME_DIR=os.path.join(T, "none")),
                   capture_output=True, text=True)
ok("slurm: without a runtime directory nsbox-oci says so and names the remedy (no traceback)",
   r.returncode == 125 and "no runtime directory" in r.stderr and "--state-dir" in r.stderr and
   "Traceback" not in r.stderr, r.stderr)
# Environment Modules' exported function in the job's environment: not passed, the job runs.
with open(os.path.join(bundle, "config.json"), "w") as f:
    json.dump({"ociVersion": "1.0.2", "root": {"path": "rootfs"},
               "process": {"args": ["sh", "-c", "echo ${FOO}; env | grep -c BASH_FUNC"], "cwd": "/",
                           "env": ["FOO=bar", "PATH=/bin", "BASH_FUNC_module%%=() {  eval x\n}", "A.B=1"]}}, f)
r = oci_run("run", "--bundle", bundle, "n1.u.4.0.0")
ok("slurm: a job whose environment has an exported shell function runs, without it",
   r.returncode == 1 and r.stdout == "bar\n0\n", (r.returncode, r.stdout, r.stderr))
oci_run("delete", "n1.u.4.0.0")
print("scale-docs: %d failed" % failed)
sys.exit(1 if failed else 0)
