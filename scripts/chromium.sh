#!/usr/bin/env bash
# Headless Chromium for the browser tests (testkit/browser.py drives it).
#
#   scripts/chromium.sh install   install Debian's chromium via apt if it is missing
#   scripts/chromium.sh path      print the chromium executable path
#   scripts/chromium.sh flags     print the command-line flags tests should pass
#   scripts/chromium.sh version   print the chromium version
#
# Only Debian's package is used: Playwright's own `playwright install` downloads
# browser builds from a CDN, which is not reachable here. Tests drive this
# binary through the PyPI `playwright` package (executable_path=...), which
# needs no driver binary beyond what its wheel ships.
#
# Non-interactive (no stdin needed) and idempotent.
set -euo pipefail

CHROMIUM_BIN="${CHROMIUM_BIN:-/usr/bin/chromium}"

# Flags that make Chromium work headless as root in a sandbox-less CI box and
# keep it off the network (no updates, sync, or background fetches). A fresh
# --user-data-dir is added by the caller per run.
CHROMIUM_FLAGS=(
  --headless
  --no-sandbox
  --disable-gpu
  --disable-quic
  --no-first-run
  --disable-background-networking
  --disable-component-update
  --disable-sync
  --disable-dev-shm-usage
)

log() { printf '[chromium.sh] %s\n' "$*" >&2; }

# apt-get as root, or through sudo when available. Waits (bounded) for the
# dpkg lock instead of failing when another apt-get runs concurrently.
apt_get() {
  local -a cmd=(apt-get -o DPkg::Lock::Timeout=300 "$@")
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive "${cmd[@]}"
  else
    sudo DEBIAN_FRONTEND=noninteractive "${cmd[@]}"
  fi
}

# Install the given Debian packages unless they are all installed already.
ensure_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    log "already installed: $*"
    return 0
  fi
  log "installing: ${missing[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}

cmd_install() {
  # fonts-liberation: readable text in screenshots (chromium pulls a minimal set).
  ensure_packages chromium fonts-liberation
  if [ ! -x "$CHROMIUM_BIN" ]; then
    log "chromium installed but $CHROMIUM_BIN is missing"
    exit 1
  fi
  cmd_version
}

cmd_path() { echo "$CHROMIUM_BIN"; }

cmd_flags() { printf '%s\n' "${CHROMIUM_FLAGS[@]}"; }

cmd_version() { "$CHROMIUM_BIN" --version 2>/dev/null; }

main() {
  case "${1:-}" in
    install) cmd_install ;;
    path) cmd_path ;;
    flags) cmd_flags ;;
    version) cmd_version ;;
    *)
      echo "usage: $0 install|path|flags|version" >&2
      exit 2
      ;;
  esac
}

main "$@"
