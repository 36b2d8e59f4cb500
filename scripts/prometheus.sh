#!/usr/bin/env bash
# scripts/prometheus.sh — a private, throw-away Prometheus for the integration tests.
#
# Usage: scripts/prometheus.sh install|start|stop [--keep-data]|status|env|reload|logs
#
#   install   apt-get install Debian's `prometheus` package, only if the binary is missing.
#             The package's own service is never started (policy-rc.d guard).
#   start     write the config and start Prometheus on 127.0.0.1:$TUNER_PROM_PORT; waits
#             (bounded polling of /-/ready) until it is ready. Idempotent: when our instance
#             already runs on that port, the config is rewritten and reloaded if it changed.
#   stop      stop our instance (SIGTERM, bounded wait, then SIGKILL) and wipe the state dir;
#             with --keep-data the TSDB and config are kept (simulates a server restart).
#   status    print state; exit 0 when running and ready, 1 running but not ready, 3 stopped.
#   env       print `export PROMETHEUS_URL=http://127.0.0.1:PORT`  (eval "$(… env)").
#   reload    re-render the config and reload it (SIGHUP), e.g. after changing the target.
#   logs      print the instance's log file.
#
# Environment (all optional):
#   TUNER_PROM_PORT             listen port on 127.0.0.1                  (default 19090)
#   TUNER_PROM_TARGET           scrape target(s), comma-separated host:port (default 127.0.0.1:19100)
#   TUNER_PROM_JOB              job label of that scrape config            (default tuner-test-exporter)
#   TUNER_PROM_STATE_DIR        config, TSDB, pid file and log             (default ${TMPDIR:-/tmp}/tuner-prometheus)
#   TUNER_PROM_SCRAPE_INTERVAL  scrape and rule evaluation interval        (default 1s)
#   TUNER_PROM_RULE_FILES       rule files to load, comma-separated        (default none)
#   TUNER_PROM_READY_TIMEOUT    seconds `start` waits for /-/ready         (default 60)
#   TUNER_PROM_BIN              the prometheus binary                      (default: prometheus on PATH)
#   TUNER_PROM_EXTRA_ARGS       extra command-line flags, word-split       (default none)
#   TUNER_PROM_RETENTION        how long the TSDB keeps samples            (default 1d; longer
#                               for a backfilled history: see testkit/prometheus_history.py)
#
# Non-interactive (no stdin needed), no systemd needed, `set -euo pipefail` throughout.
set -euo pipefail

readonly HOST=127.0.0.1
readonly PORT="${TUNER_PROM_PORT:-19090}"
readonly TARGETS="${TUNER_PROM_TARGET:-127.0.0.1:19100}"
readonly JOB="${TUNER_PROM_JOB:-tuner-test-exporter}"
readonly STATE_DIR="${TUNER_PROM_STATE_DIR:-${TMPDIR:-/tmp}/tuner-prometheus}"
readonly INTERVAL="${TUNER_PROM_SCRAPE_INTERVAL:-1s}"
readonly RULE_FILES="${TUNER_PROM_RULE_FILES:-}"
readonly READY_TIMEOUT="${TUNER_PROM_READY_TIMEOUT:-60}"
readonly EXTRA_ARGS="${TUNER_PROM_EXTRA_ARGS:-}"
readonly RETENTION="${TUNER_PROM_RETENTION:-1d}"
readonly STOP_TIMEOUT=20

readonly CONFIG_FILE="$STATE_DIR/prometheus.yml"
readonly DATA_DIR="$STATE_DIR/data"
readonly PID_FILE="$STATE_DIR/prometheus.pid"
readonly PORT_FILE="$STATE_DIR/prometheus.port"
readonly LOG_FILE="$STATE_DIR/prometheus.log"
# Marker that makes `stop` willing to delete the directory (never wipe a dir we did not create).
readonly MARKER_FILE="$STATE_DIR/.tuner-prometheus"
readonly URL="http://$HOST:$PORT"

log() { printf 'prometheus.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Monotonic-enough clock in milliseconds for bounded polling loops.
now_ms() { date +%s%3N; }

# The prometheus binary to run (env override, PATH, or Debian's location).
prom_bin() {
    if [[ -n "${TUNER_PROM_BIN:-}" ]]; then
        printf '%s\n' "$TUNER_PROM_BIN"
    elif command -v prometheus >/dev/null 2>&1; then
        command -v prometheus
    elif [[ -x /usr/bin/prometheus ]]; then
        printf '%s\n' /usr/bin/prometheus
    else
        return 1
    fi
}

# ---------------------------------------------------------------- install

apt_install_prometheus() {
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        prometheus </dev/null >/dev/null
}

# Install Debian's prometheus package without starting its service. Debian's maintainer
# scripts start services through invoke-rc.d / deb-systemd-invoke, which both honour
# /usr/sbin/policy-rc.d exiting 101 ("action forbidden"); we add one only for the duration
# of the install if the machine has none. Recommends (node-exporter etc.) are skipped.
cmd_install() {
    if prom_bin >/dev/null; then
        log "already installed: $("$(prom_bin)" --version 2>&1 | head -n1)"
        return 0
    fi
    [[ $(id -u) -eq 0 ]] || die "installing needs root (apt-get)"
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\n# temporary, added by scripts/prometheus.sh\nexit 101\n' >"$policy"
        chmod 0755 "$policy"
        added_policy=1
        # shellcheck disable=SC2064  # expand now: remove exactly the file we created
        trap "rm -f '$policy'" EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg (another job on the machine) instead of failing.
    local -a apt=(apt-get -o DPkg::Lock::Timeout=300)
    log "apt-get update"
    "${apt[@]}" update -qq </dev/null
    log "apt-get install prometheus"
    if ! apt_install_prometheus; then
        # One retry after finishing any half-configured packages (interrupted dpkg run).
        log "install failed, retrying after dpkg --configure -a"
        dpkg --configure -a </dev/null || true
        apt_install_prometheus
    fi
    if ((added_policy)); then rm -f "$policy"; trap - EXIT; fi
    prom_bin >/dev/null || die "prometheus binary not found after install"
    log "installed: $("$(prom_bin)" --version 2>&1 | head -n1)"
}

# ---------------------------------------------------------------- process helpers

# PID of our running instance, or failure. Guards against stale pid files and PID reuse
# by checking that the process is a prometheus using our config file.
running_pid() {
    [[ -f $PID_FILE ]] || return 1
    local pid
    pid=$(<"$PID_FILE")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config.file=$CONFIG_FILE" || return 1
    printf '%s\n' "$pid"
}

# True when something accepts TCP connections on our port.
port_in_use() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

# True when /-/ready answers 200.
is_ready() { curl -fsS --max-time 1 -o /dev/null "$URL/-/ready" 2>/dev/null; }

# Poll /-/ready every 100 ms until ready, the process dies, or READY_TIMEOUT passes.
wait_ready() {
    local pid=$1 deadline=$(( $(now_ms) + READY_TIMEOUT * 1000 ))
    until is_ready; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$LOG_FILE" >&2 || true
            die "prometheus (pid $pid) exited during startup; log: $LOG_FILE"
        fi
        if (( $(now_ms) > deadline )); then
            tail -n 30 "$LOG_FILE" >&2 || true
            die "prometheus not ready on $URL after ${READY_TIMEOUT}s; log: $LOG_FILE"
        fi
        sleep 0.1
    done
}

# ---------------------------------------------------------------- config

# Render prometheus.yml into $1 (one static scrape job over TARGETS, optional rule files).
render_config() {
    local out=$1 target rule
    {
        echo "# generated by scripts/prometheus.sh — do not edit, rewritten on start/reload"
        echo "global:"
        echo "  scrape_interval: $INTERVAL"
        echo "  scrape_timeout: $INTERVAL"
        echo "  evaluation_interval: $INTERVAL"
        if [[ -n $RULE_FILES ]]; then
            echo "rule_files:"
            IFS=',' read -r -a rules <<<"$RULE_FILES"
            for rule in "${rules[@]}"; do echo "  - '$rule'"; done
        fi
        echo "scrape_configs:"
        echo "  - job_name: '$JOB'"
        # Keep the exporter's own namespace/pod/… labels as kube-state-metrics scrapes do.
        echo "    honor_labels: true"
        echo "    static_configs:"
        echo "      - targets:"
        IFS=',' read -r -a targets <<<"$TARGETS"
        for target in "${targets[@]}"; do echo "          - '$target'"; done
    } >"$out"
}

# Rewrite the config; returns 0 when it changed, 1 when identical.
write_config() {
    local tmp="$CONFIG_FILE.new"
    render_config "$tmp"
    if [[ -f $CONFIG_FILE ]] && cmp -s "$tmp" "$CONFIG_FILE"; then
        rm -f "$tmp"
        return 1
    fi
    mv -f "$tmp" "$CONFIG_FILE"
}

# Create the state dir, or adopt an existing one only when it is ours (marker) or empty,
# so that `stop` can never wipe a directory someone pointed TUNER_PROM_STATE_DIR at by mistake.
prepare_state_dir() {
    if [[ -d $STATE_DIR && ! -f $MARKER_FILE && -n $(ls -A "$STATE_DIR") ]]; then
        die "$STATE_DIR is not empty and was not created by this script; pick another TUNER_PROM_STATE_DIR"
    fi
    mkdir -p "$STATE_DIR" "$DATA_DIR"
    touch "$MARKER_FILE"
}

# ---------------------------------------------------------------- commands

cmd_start() {
    local bin pid
    bin=$(prom_bin) || die "prometheus not installed; run: $0 install"
    prepare_state_dir

    if pid=$(running_pid); then
        if [[ -f $PORT_FILE && $(<"$PORT_FILE") != "$PORT" ]]; then
            die "our instance (pid $pid) listens on port $(<"$PORT_FILE"), not $PORT; run: $0 stop"
        fi
        wait_ready "$pid"
        if write_config; then
            log "config changed, reloading pid $pid"
            reload_config
        fi
        log "already running (pid $pid) on $URL"
        return 0
    fi

    port_in_use && die "port $PORT on $HOST is taken by another process (set TUNER_PROM_PORT)"
    write_config || true

    local -a extra=()
    # shellcheck disable=SC2206  # word-splitting of the extra flags is intended
    [[ -n $EXTRA_ARGS ]] && extra=($EXTRA_ARGS)
    # setsid: own session, so the caller's Ctrl-C / process-group kill does not hit it and
    # it never reads the terminal; stop it with `stop`.
    setsid "$bin" \
        --config.file="$CONFIG_FILE" \
        --storage.tsdb.path="$DATA_DIR" \
        --storage.tsdb.retention.time="$RETENTION" \
        --web.listen-address="$HOST:$PORT" \
        --web.enable-lifecycle \
        --web.enable-admin-api \
        --log.level=info \
        "${extra[@]}" \
        </dev/null >>"$LOG_FILE" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$PID_FILE"
    printf '%s\n' "$PORT" >"$PORT_FILE"
    local t0
    t0=$(now_ms)
    wait_ready "$pid"
    log "started pid $pid on $URL (ready in $(( $(now_ms) - t0 )) ms), scraping $TARGETS every $INTERVAL"
}

cmd_stop() {
    local keep=0 pid
    [[ ${1:-} == --keep-data ]] && keep=1
    if pid=$(running_pid); then
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$(( $(now_ms) + STOP_TIMEOUT * 1000 ))
        while kill -0 "$pid" 2>/dev/null; do
            if (( $(now_ms) > deadline )); then
                log "pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s, sending SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.1
        done
        log "stopped pid $pid"
    else
        log "not running"
    fi
    rm -f "$PID_FILE"
    if ((keep)); then
        log "kept state dir $STATE_DIR"
    elif [[ -d $STATE_DIR ]]; then
        # Only wipe a directory this script created (marker file), never an arbitrary path.
        if [[ -f $MARKER_FILE ]]; then
            rm -rf -- "$STATE_DIR"
            log "wiped $STATE_DIR"
        else
            log "not wiping $STATE_DIR: no $(basename "$MARKER_FILE") marker"
        fi
    fi
}

cmd_status() {
    local pid
    if ! pid=$(running_pid); then
        echo "stopped (state dir $STATE_DIR)"
        return 3
    fi
    if is_ready; then
        echo "running pid $pid on $URL, ready; scraping $TARGETS; state dir $STATE_DIR"
        return 0
    fi
    echo "running pid $pid on $URL, NOT ready; state dir $STATE_DIR"
    return 1
}

cmd_env() { echo "export PROMETHEUS_URL=$URL"; }

# Ask the running instance to re-read its config; /-/reload (lifecycle API) answers only
# after the reload is done and fails on an invalid config, unlike a bare SIGHUP.
reload_config() {
    curl -fsS --max-time 30 -X POST "$URL/-/reload" >/dev/null ||
        die "config reload failed; see $LOG_FILE"
}

cmd_reload() {
    local pid
    pid=$(running_pid) || die "not running"
    write_config || true
    reload_config
    log "reloaded pid $pid"
}

cmd_logs() { cat "$LOG_FILE"; }

usage() {
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
}

main() {
    local cmd=${1:-}
    [[ $# -gt 0 ]] && shift
    case $cmd in
        install) cmd_install "$@" ;;
        start) cmd_start "$@" ;;
        stop) cmd_stop "$@" ;;
        status) cmd_status "$@" ;;
        env) cmd_env "$@" ;;
        reload) cmd_reload "$@" ;;
        logs) cmd_logs "$@" ;;
        -h | --help | help) usage ;;
        *) usage >&2; exit 2 ;;
    esac
}

main "$@"
