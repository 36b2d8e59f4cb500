#!/usr/bin/env bash
# scripts/image.sh — the daemon's image (Containerfile) built without a container engine
# daemon: buildah from Debian's packages, its own storage (vfs driver) under the cache.
#
#   scripts/image.sh install        apt-get install buildah and debootstrap (once)
#   scripts/image.sh base           a Debian bookworm base with python3 and venv (cached)
#   scripts/image.sh build [TAG]    build Containerfile on that base (default tuner-test:latest)
#   scripts/image.sh run TAG ARGS   run `tuner ARGS` in the image (the repo's examples/ and
#                                   settings/ mounted read-only at /data and /settings)
#   scripts/image.sh size TAG       the image's size in bytes
#   scripts/image.sh buildah ARGS   buildah with this storage
#
# The base comes from Debian's packages (debootstrap --variant=minbase), not from a registry:
# this machine reaches none. Every setting below can be overridden from the environment.
set -euo pipefail

CACHE_ROOT="${TUNER_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tuner/image}"
STORE="$CACHE_ROOT/storage"
RUNROOT="${TUNER_IMAGE_RUNROOT:-$CACHE_ROOT/run}"
SUITE="${TUNER_IMAGE_SUITE:-bookworm}"
BASE="localhost/tuner-base-$SUITE:latest"
REPO="$(cd "$(dirname "$0")/.." && pwd)"

log() { printf '[image.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

buildah_() {
  buildah --root "$STORE" --runroot "$RUNROOT" --storage-driver vfs "$@"
}

cmd_install() {
  command -v buildah >/dev/null && command -v debootstrap >/dev/null && return
  log "installing buildah and debootstrap (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah debootstrap >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah debootstrap >/dev/null; }
}

cmd_base() {
  cmd_install
  mkdir -p "$CACHE_ROOT"
  (
    flock 9
    buildah_ inspect --type image "$BASE" >/dev/null 2>&1 && exit 0
    local ctr mnt t0=$SECONDS
    log "building $BASE from Debian's packages"
    ctr=$(buildah_ from scratch)
    mnt=$(buildah_ mount "$ctr")
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      "$SUITE" "$mnt" >"$CACHE_ROOT/debootstrap.log" 2>&1 ||
      { tail -20 "$CACHE_ROOT/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/*
    buildah_ umount "$ctr" >/dev/null
    buildah_ config --env LANG=C.UTF-8 "$ctr"
    buildah_ commit --quiet --rm "$ctr" "$BASE" >/dev/null
    log "built $BASE in $((SECONDS - t0)) s"
  ) 9>"$CACHE_ROOT/.lock"
}

cmd_build() {
  local tag=${1:-tuner-test:latest} t0=$SECONDS
  cmd_base
  log "building $tag from Containerfile"
  local ca=()
  # pip inside the build trusts what pip here trusts (a proxy's CA, if this machine has one).
  if [[ -n "${PIP_CERT:-}" && -f "$PIP_CERT" ]]; then
    ca=(--volume "$PIP_CERT:/run/pip-ca.crt:ro" --build-arg PIP_CERT=/run/pip-ca.crt)
  fi
  buildah_ bud --layers --isolation chroot --build-arg "BASE=$BASE" "${ca[@]}" \
    -f "$REPO/Containerfile" -t "$tag" "$REPO" >"$CACHE_ROOT/build.log" 2>&1 ||
    { tail -40 "$CACHE_ROOT/build.log" >&2; die "building $tag failed (log: $CACHE_ROOT/build.log)"; }
  # vfs stores every layer whole: drop the untagged intermediates (GBs), keep the base.
  buildah_ rmi --prune >/dev/null 2>&1 || true
  log "built $tag in $((SECONDS - t0)) s"
}

CONTAINER=""
cmd_run() {
  local tag=$1
  shift
  CONTAINER=$(buildah_ from --quiet "$tag")
  trap 'buildah_ rm "$CONTAINER" >/dev/null' EXIT
  buildah_ run --isolation chroot --user 10001:10001 \
    -v "$REPO/examples:/data:ro" -v "$REPO/settings:/settings:ro" "$CONTAINER" -- tuner "$@"
}

cmd_size() {
  buildah_ inspect --type image --format '{{.ImageSize}}' "$1" 2>/dev/null ||
    buildah_ images --noheading --format '{{.Size}}' "$1"
}

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    install) cmd_install ;;
    base) cmd_base ;;
    build) cmd_build "$@" ;;
    run) cmd_run "$@" ;;
    size) cmd_size "$@" ;;
    buildah) buildah_ "$@" ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
