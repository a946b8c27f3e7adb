#!/bin/sh
# Build the default image with Docker and import it into nsbox:
#   rootfs/docker-export.sh [NAME]        (NAME defaults to 'default')
# It runs `docker build`, `docker create` and `docker export` to a flat tar,
# then `nsbox image import NAME TAR`. Needs a running Docker engine.
set -eu
name=${1:-default}
here=$(cd "$(dirname "$0")" && pwd)
tag=nsbox-image-$name
out=${TMPDIR:-/tmp}/nsbox-$name-$$.tar
trap 'rm -f "$out"; [ -n "${cid:-}" ] && docker rm "$cid" >/dev/null 2>&1 || true' EXIT
docker build -t "$tag" -f "$here/Dockerfile" "$here"
cid=$(docker create "$tag")
docker export -o "$out" "$cid"
nsbox image import "$name" "$out"
