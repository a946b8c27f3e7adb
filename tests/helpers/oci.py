#!/usr/bin/env python3
"""An OCI image layout for the pull tests, made here from a directory: one
gzip layer with its files (owners root), a config and a manifest, named by
their digests, tagged "latest". With --whiteout-escape NAME, a second layer
whose whiteout climbs out of the image ("../../NAME" whited out, as a hostile
registry would serve it).
Usage: oci.py LAYOUT_DIR ROOTFS_DIR [--whiteout-escape NAME]"""
import gzip, hashlib, io, json, os, sys, tarfile

layout, src = sys.argv[1], sys.argv[2]
escape = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--whiteout-escape" else None
os.makedirs(f"{layout}/blobs/sha256", exist_ok=True)

def blob(data):
    h = hashlib.sha256(data).hexdigest()
    with open(f"{layout}/blobs/sha256/{h}", "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + h, "size": len(data)}

def layer(add):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        add(t)
    plain = raw.getvalue()
    d = blob(gzip.compress(plain, mtime=0))
    d["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    return d, "sha256:" + hashlib.sha256(plain).hexdigest()

def add_tree(t):
    def owned_by_root(info):
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info
    for name in sorted(os.listdir(src)):
        t.add(os.path.join(src, name), arcname=name, filter=owned_by_root)

def add_escape(t):
    info = tarfile.TarInfo("../../" + os.path.dirname(escape) + "/.wh." + os.path.basename(escape))
    info.size = 0
    t.addfile(info, io.BytesIO(b""))

layers = [layer(add_tree)]
if escape:
    layers.append(layer(add_escape))
config = {"architecture": "amd64", "os": "linux", "config": {},
          "rootfs": {"type": "layers", "diff_ids": [diff for _, diff in layers]}}
cfg = blob(json.dumps(config).encode())
cfg["mediaType"] = "application/vnd.oci.image.config.v1+json"
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": cfg, "layers": [d for d, _ in layers]}
m = blob(json.dumps(manifest).encode())
m["mediaType"] = manifest["mediaType"]
m["annotations"] = {"org.opencontainers.image.ref.name": "latest"}
with open(f"{layout}/index.json", "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [m]}, f)
with open(f"{layout}/oci-layout", "w") as f:
    f.write('{"imageLayoutVersion":"1.0.0"}')
print(m["digest"])
