"""Validate Kubernetes objects against the API schema, strictly, offline
(used by scale-docs.py for docs/scale/k8s-worker.yaml).

The schema is Debian's python3-kubernetes: its models are generated from the
Kubernetes OpenAPI document (22.x: the Kubernetes 1.22 API), each with the
JSON name and type of every field. Every object is walked against it: an
unknown field, a wrong type, a missing required field is an error with its
path. Fields the API gained after 1.22 are not in it; the few the manifest
needs are listed in LATER with the version that added them (from the API
reference), so that anything else unknown still fails.

Also the Pod Security Standards' Baseline controls that a pod spec can break
(kubernetes.io/docs/concepts/security/pod-security-standards), as a list of
violations.
"""
import re

from kubernetes import client

# (model, JSON field) -> (type in the models' notation, Kubernetes version).
LATER = {
    ("V1PodSpec", "hostUsers"): ("bool", "1.25"),
    ("V1SecurityContext", "appArmorProfile"): ("V1AppArmorProfile", "1.30"),
    ("V1PodSecurityContext", "appArmorProfile"): ("V1AppArmorProfile", "1.30"),
}
# Kinds added later still, with their fields (1.30: core/v1 AppArmorProfile).
LATER_MODELS = {
    "V1AppArmorProfile": ({"type": "str", "localhostProfile": "str"}, {"type"},
                          {"type": {"Localhost", "RuntimeDefault", "Unconfined"}}),
}
# Enumerations the models do not check.
ENUMS = {
    ("V1SecurityContext", "procMount"): {"Default", "Unmasked"},
    ("V1SeccompProfile", "type"): {"Localhost", "RuntimeDefault", "Unconfined"},
    ("V1HostPathVolumeSource", "type"): {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                                         "CharDevice", "BlockDevice"},
}
KINDS = {("v1", "Namespace"): "V1Namespace", ("v1", "ConfigMap"): "V1ConfigMap",
         ("apps/v1", "Deployment"): "V1Deployment"}


def _fields(model):
    if model in LATER_MODELS:
        types, required, _ = LATER_MODELS[model]
        return dict(types), set(required)
    cls = getattr(client, model)
    types = {cls.attribute_map[a]: t for a, t in cls.openapi_types.items()}
    for (m, field), (t, _) in LATER.items():
        if m == model:
            types[field] = t
    return types, _required(cls)


def _required(cls):
    # The generated constructor raises for a required field left None.
    need = set()
    kw = {}
    for _ in range(len(cls.openapi_types) + 1):
        try:
            cls(**kw)
            return need
        except ValueError as e:
            m = re.search(r"`(\w+)`, must not be `None`", str(e))
            if not m or m.group(1) in kw:
                return need
            need.add(cls.attribute_map[m.group(1)])
            kw[m.group(1)] = "x"
    return need


def validate(obj, model, path="", errors=None):
    """Errors ("path: what") of obj against model (e.g. "V1Deployment")."""
    errors = [] if errors is None else errors
    m = re.fullmatch(r"list\[(.+)\]", model)
    if m:
        if not isinstance(obj, list):
            errors.append("%s: expected a list" % path)
        else:
            for i, x in enumerate(obj):
                validate(x, m.group(1), "%s[%d]" % (path, i), errors)
        return errors
    m = re.fullmatch(r"dict\(str, (.+)\)", model)
    if m:
        if not isinstance(obj, dict):
            errors.append("%s: expected a map" % path)
        else:
            for k, v in obj.items():
                validate(v, m.group(1), "%s.%s" % (path, k), errors)
        return errors
    prim = {"str": str, "bool": bool, "int": int, "float": (int, float), "object": object, "datetime": str}
    if model in prim:
        if not isinstance(obj, prim[model]) or (model in ("int", "float") and isinstance(obj, bool)):
            errors.append("%s: expected %s, got %r" % (path, model, obj))
        return errors
    if not isinstance(obj, dict):
        errors.append("%s: expected an object (%s)" % (path, model))
        return errors
    types, required = _fields(model)
    for k in sorted(required - set(obj)):
        errors.append("%s.%s: required by %s" % (path, k, model))
    enums = dict(LATER_MODELS.get(model, ({}, set(), {}))[2])
    enums.update({f: v for (mm, f), v in ENUMS.items() if mm == model})
    for k, v in obj.items():
        if k not in types:
            errors.append("%s.%s: no such field in %s" % (path, k, model))
            continue
        validate(v, types[k], "%s.%s" % (path, k), errors)
        if k in enums and v not in enums[k]:
            errors.append("%s.%s: %r is not one of %s" % (path, k, v, sorted(enums[k])))
    return errors


def validate_document(doc):
    model = KINDS.get((doc.get("apiVersion"), doc.get("kind")))
    if model is None:
        return ["%s %s: a kind this check does not know" % (doc.get("apiVersion"), doc.get("kind"))]
    return validate(doc, model, doc["kind"])


def baseline_violations(pod):
    """The Baseline controls a pod spec breaks: [(control, where)]."""
    out = []
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(k):
            out.append(("host namespaces", "spec." + k))
    for v in pod.get("volumes", []):
        if "hostPath" in v:
            out.append(("hostPath volumes", "spec.volumes[%s]" % v.get("name")))
    allowed_caps = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
    scopes = [("spec", pod.get("securityContext") or {})]
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in pod.get(kind, []):
            where = "spec.%s[%s]" % (kind, c.get("name"))
            sc = c.get("securityContext") or {}
            scopes.append((where, sc))
            if sc.get("privileged"):
                out.append(("privileged containers", where))
            if set((sc.get("capabilities") or {}).get("add", [])) - allowed_caps:
                out.append(("capabilities", where))
            if sc.get("procMount", "Default") != "Default":
                out.append(("/proc mount type", where))
            for p in c.get("ports", []):
                if p.get("hostPort"):
                    out.append(("host ports", where))
    for where, sc in scopes:
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            out.append(("AppArmor", where))
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(("seccomp", where))
        if (sc.get("seLinuxOptions") or {}).get("type") not in (None, "", "container_t", "container_init_t",
                                                               "container_kvm_t", "container_engine_t"):
            out.append(("SELinux", where))
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(("HostProcess", where))
    return out
