#!/usr/bin/env bash
# Where no image registry is reachable but Debian's mirror is: makes the Dockerfile's base images
# (debian:bookworm and debian:bookworm-slim, here the same minbase tree) with debootstrap and
# imports them into podman. Needs root, debootstrap and podman.
set -euo pipefail
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root/rootfs" "$mirror"
tar -C "$root/rootfs" -c . | podman import - docker.io/library/debian:bookworm
podman tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
podman images docker.io/library/debian
