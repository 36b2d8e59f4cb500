#!/usr/bin/env bash
# Local Neo4j 5.26 Community server for tests, assembled from Maven Central only.
#
#   scripts/neo4j.sh install        fetch + assemble the server into the cache (idempotent)
#   scripts/neo4j.sh start          install if needed, start on loopback, wait until it answers
#   scripts/neo4j.sh stop [--keep]  stop cleanly; wipe the state dir unless --keep
#   scripts/neo4j.sh status         exit 0 when running (3 when not), print pid/ports
#   scripts/neo4j.sh env            print `export NEO4J_URI=...` lines (eval "$(... env)"),
#                                   TUNER_NEO4J_PASSWORD (what the tuner reads) among them
#   scripts/neo4j.sh cypher [args]  run cypher-shell against the server
#                                   (e.g. `cypher 'RETURN 1'`, or a script on stdin)
#
# Why assemble: Neo4j's packaged tarball (org.neo4j.assembly:neo4j-community-standalone)
# is published to Maven Central only as a POM, not as the tar.gz. Its dependency tree,
# however, is exactly the tarball's lib/ directory, so `mvn dependency:copy-dependencies`
# on a throwaway POM that depends on it (type pom) rebuilds lib/. The Neo4j Browser web
# bundle (org.neo4j.client:neo4j-browser) is added to lib/; the server serves it at
# /browser/ when it is on the classpath. The server main class is the one the packaged
# `neo4j` launcher starts: org.neo4j.server.CommunityEntryPoint.
#
# Start-up speed: install also records a dynamic AppCDS archive (class-data sharing)
# from one training start/stop, and the JVM runs with C1 only; together that roughly
# halves the start time on a small machine.
#
# Environment (all optional):
#   NEO4J_BOLT_PORT (7687)  NEO4J_HTTP_PORT (7474)   listen ports, always on 127.0.0.1
#   NEO4J_USER (neo4j)      NEO4J_PASSWORD (tuner-test-pw, at least 8 characters)
#   NEO4J_HEAP (512m)       NEO4J_PAGECACHE (128m)
#   NEO4J_START_TIMEOUT (120) NEO4J_STOP_TIMEOUT (60)  seconds
#   NEO4J_VERSION (5.26.30) NEO4J_BROWSER_VERSION (5.24.0)
#   NEO4J_CACHE_DIR  (${XDG_CACHE_HOME:-$HOME/.cache}/tuner/neo4j)  downloads + assembly
#   NEO4J_STATE_DIR  ($NEO4J_CACHE_DIR/state/<bolt port>)          data, logs, conf, pid
#   NEO4J_KEEP_M2    (0) 1 keeps Maven's download repository ($NEO4J_CACHE_DIR/m2)
#   JAVA_HOME        Java 17 or 21 (else `java` on PATH)
set -euo pipefail

# --- settings -----------------------------------------------------------------

# Newest 5.26.x on Maven Central at the time of writing (5.26 is the last 5.x line,
# and the last one that runs on Java 17). org.neo4j.client:neo4j-browser's newest
# release is 5.24.0; it works with 5.26 servers.
NEO4J_VERSION="${NEO4J_VERSION:-5.26.30}"
NEO4J_BROWSER_VERSION="${NEO4J_BROWSER_VERSION:-5.24.0}"
# Pinned so the assembly does not depend on whichever plugin version Maven picks.
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

NEO4J_HOST="127.0.0.1"
NEO4J_BOLT_PORT="${NEO4J_BOLT_PORT:-7687}"
NEO4J_HTTP_PORT="${NEO4J_HTTP_PORT:-7474}"
NEO4J_USER="${NEO4J_USER:-neo4j}"
NEO4J_PASSWORD="${NEO4J_PASSWORD:-tuner-test-pw}"
NEO4J_HEAP="${NEO4J_HEAP:-512m}"
NEO4J_PAGECACHE="${NEO4J_PAGECACHE:-128m}"
NEO4J_START_TIMEOUT="${NEO4J_START_TIMEOUT:-120}"
NEO4J_STOP_TIMEOUT="${NEO4J_STOP_TIMEOUT:-60}"

CACHE_DIR="${NEO4J_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tuner/neo4j}"
DIST_DIR="$CACHE_DIR/neo4j-community-$NEO4J_VERSION-browser-$NEO4J_BROWSER_VERSION"
M2_REPO="$CACHE_DIR/m2"                      # Maven's local repository during assembly
STATE_DIR="${NEO4J_STATE_DIR:-$CACHE_DIR/state/$NEO4J_BOLT_PORT}"

MAIN_CLASS="org.neo4j.server.CommunityEntryPoint"
ADMIN_CLASS="org.neo4j.cli.AdminTool"         # what `neo4j-admin` runs in its child JVM
SHELL_CLASS="org.neo4j.shell.Main"            # cypher-shell

# --- helpers ------------------------------------------------------------------

log() { printf '[neo4j.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

java_bin() { echo "${JAVA_HOME:+$JAVA_HOME/bin/}java"; }

# Facts about the JVM that will run Neo4j, read once (a JVM start each time):
#   JAVA_MAJOR        e.g. 17
#   JAVA_FINGERPRINT  VM version + home; the CDS archive is only valid for the
#                     JVM that wrote it.
JAVA_MAJOR=""
JAVA_FINGERPRINT=""
load_java_info() {
  [ -n "$JAVA_FINGERPRINT" ] && return 0
  local props
  props="$("$(java_bin)" -XshowSettings:properties -version 2>&1)" || die "cannot run $(java_bin)"
  JAVA_MAJOR="$(sed -n 's/^ *java\.specification\.version = //p' <<<"$props" | cut -d. -f1)"
  JAVA_FINGERPRINT="$(sed -n 's/^ *java\.\(vm\.version\|home\) = //p' <<<"$props" | tr '\n' ' ')"
}

check_java() {
  command -v "$(java_bin)" >/dev/null || die "java not found (set JAVA_HOME)"
  load_java_info
  case "$JAVA_MAJOR" in
    17 | 21) ;;
    *) die "Neo4j $NEO4J_VERSION needs Java 17 or 21, found '$JAVA_MAJOR'" ;;
  esac
}

# 0 when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  (exec 3<>"/dev/tcp/$NEO4J_HOST/$1") 2>/dev/null
}

# A free loopback TCP port (for the CDS training run).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Classpath: the lib/ jars in the fixed order recorded at install time (the CDS
# archive requires the same order), then any plugin jars of this state dir.
classpath() {
  local state="$1" cp jar
  cp="$(cat "$DIST_DIR/classpath.txt")"
  for jar in "$state"/plugins/*.jar; do
    [ -e "$jar" ] && cp="$cp:$jar"
  done
  echo "$cp"
}

# JVM options shared by the server, admin and shell JVMs -> array JVM_OPTS.
JVM_OPTS=()
set_jvm_opts() {
  load_java_info
  JVM_OPTS=(
    -XX:TieredStopAtLevel=1 # C1 only: faster start, less CPU on a shared box
    -XX:+UseSerialGC        # smallest footprint; pauses on a small test heap are short
    -XX:-OmitStackTraceInFastThrow
    -Dfile.encoding=UTF-8
  )
  if [ -s "$DIST_DIR/cds.jsa" ] && [ "$(cat "$DIST_DIR/cds.jvm" 2>/dev/null)" = "$JAVA_FINGERPRINT" ]; then
    JVM_OPTS+=(-XX:SharedArchiveFile="$DIST_DIR/cds.jsa")
  fi
}

# --- install ------------------------------------------------------------------

# The throwaway POM whose runtime dependency tree is the server's lib/ directory.
write_assembly_pom() {
  cat >"$1/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.tuner</groupId>
  <artifactId>neo4j-community-assembly</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <!-- the packaged server's dependency set (its tarball is not on Maven Central) -->
    <dependency>
      <groupId>org.neo4j.assembly</groupId>
      <artifactId>neo4j-community-standalone</artifactId>
      <version>$NEO4J_VERSION</version>
      <type>pom</type>
    </dependency>
    <!-- Neo4j Browser web bundle, served at /browser/ -->
    <dependency>
      <groupId>org.neo4j.client</groupId>
      <artifactId>neo4j-browser</artifactId>
      <version>$NEO4J_BROWSER_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
}

# Resolve all jars with Maven into $1/lib.
fetch_jars() {
  local build="$1"
  command -v mvn >/dev/null || die "mvn not found"
  write_assembly_pom "$build"
  log "resolving org.neo4j.assembly:neo4j-community-standalone:$NEO4J_VERSION + neo4j-browser:$NEO4J_BROWSER_VERSION"
  if ! (cd "$build" && mvn -B -q -Dstyle.color=never -f pom.xml -Dmaven.repo.local="$M2_REPO" \
    "$DEPENDENCY_PLUGIN:copy-dependencies" \
    -DoutputDirectory="$build/lib" -DincludeScope=runtime -DexcludeTypes=pom \
    </dev/null >"$build/mvn.log" 2>&1); then
    cat "$build/mvn.log" >&2
    die "mvn dependency:copy-dependencies failed"
  fi
  [ -f "$build/lib/neo4j-server-$NEO4J_VERSION.jar" ] || die "neo4j-server jar missing after mvn"
  [ -f "$build/lib/neo4j-browser-$NEO4J_BROWSER_VERSION.jar" ] || die "neo4j-browser jar missing after mvn"
}

# One training run (call it in a subshell): a throwaway server on free ports with
# -XX:ArchiveClassesAtExit, exercised over HTTP, the Browser and Bolt, then
# stopped; the JVM writes the class-data-sharing archive when it exits.
cds_training_run() {
  local state="$1"
  NEO4J_BOLT_PORT="$(free_port)"
  NEO4J_HTTP_PORT="$(free_port)"
  # Stop the training server however this subshell ends (die exits it).
  # shellcheck disable=SC2064 # expand $state now: it is local to this function
  trap "server_stop $(printf '%q' "$state")" EXIT
  server_start "$state" -XX:ArchiveClassesAtExit="$DIST_DIR/cds.jsa.tmp" || return 1
  curl -sf -o /dev/null "http://$NEO4J_HOST:$NEO4J_HTTP_PORT/browser/" || return 1
  curl -sf -o /dev/null -u "$NEO4J_USER:$NEO4J_PASSWORD" -H 'Content-Type: application/json' \
    -d '{"statements":[{"statement":"CREATE p=(:T)-[:R]->(:T) RETURN p"}]}' \
    "http://$NEO4J_HOST:$NEO4J_HTTP_PORT/db/neo4j/tx/commit" || return 1
  run_cypher_shell "$state" 'MATCH (n) DETACH DELETE n' >/dev/null || return 1
}

# Record the CDS archive. Optional: on failure the server runs without it.
train_cds_archive() {
  local train="$DIST_DIR/.cds-train"
  rm -rf "$train" "$DIST_DIR"/cds.*
  log "recording a class-data-sharing archive (one training start/stop)"
  if (cds_training_run "$train") && [ -s "$DIST_DIR/cds.jsa.tmp" ]; then
    mv -f "$DIST_DIR/cds.jsa.tmp" "$DIST_DIR/cds.jsa"
    echo "$JAVA_FINGERPRINT" >"$DIST_DIR/cds.jvm"
  else
    log "warning: CDS training failed; the server starts without it (slower, still works)"
    rm -f "$DIST_DIR/cds.jsa.tmp"
    echo "$JAVA_FINGERPRINT" >"$DIST_DIR/cds.failed" # do not retry for this JVM
  fi
  rm -rf "$train"
}

# (Re)record the CDS archive when there is none for the current JVM (first
# install, or after a JVM upgrade) and training has not already failed for it.
ensure_cds_archive() {
  load_java_info
  local fp="$JAVA_FINGERPRINT"
  if [ -s "$DIST_DIR/cds.jsa" ] && [ "$(cat "$DIST_DIR/cds.jvm" 2>/dev/null)" = "$fp" ]; then
    return 0
  fi
  [ "$(cat "$DIST_DIR/cds.failed" 2>/dev/null)" = "$fp" ] && return 0
  train_cds_archive
}

# Download and lay out lib/ (once per version).
assemble_dist() {
  local build="$DIST_DIR.build.$$"
  rm -rf "$build"
  mkdir -p "$build"
  fetch_jars "$build"
  # Fixed jar order for the classpath (CDS checks it on every start).
  (cd "$build/lib" && printf '%s\n' *.jar | LC_ALL=C sort | sed "s|^|$DIST_DIR/lib/|" | paste -sd: -) \
    >"$build/classpath.txt"
  touch "$build/.complete"
  rm -rf "$DIST_DIR"
  mv "$build" "$DIST_DIR"
  # lib/ holds copies of every jar; the Maven repository would only double the
  # cache (NEO4J_KEEP_M2=1 keeps it, e.g. to try other versions offline).
  [ "${NEO4J_KEEP_M2:-0}" = 1 ] || rm -rf "$M2_REPO"
}

cmd_install() {
  check_java
  mkdir -p "$CACHE_DIR"
  # One installer at a time (parallel test jobs may all call start).
  exec 9>"$CACHE_DIR/.install.lock"
  flock -w 900 9 || die "timed out waiting for another install"
  if [ -f "$DIST_DIR/.complete" ]; then
    ensure_cds_archive
    log "cached: $DIST_DIR"
  else
    assemble_dist
    ensure_cds_archive
    log "installed Neo4j $NEO4J_VERSION into $DIST_DIR ($(du -sh "$CACHE_DIR" | cut -f1) cache)"
  fi
  exec 9>&-
}

# --- server lifecycle ---------------------------------------------------------

# neo4j.conf for one state dir. Everything but lib/ lives in the state dir.
write_conf() {
  local state="$1"
  mkdir -p "$state/conf" "$state/data" "$state/logs" "$state/run" "$state/import" "$state/plugins"
  cat >"$state/conf/neo4j.conf" <<EOF
# Generated by scripts/neo4j.sh; rewritten on every start.
server.default_listen_address=$NEO4J_HOST
server.default_advertised_address=$NEO4J_HOST
server.bolt.enabled=true
server.bolt.listen_address=$NEO4J_HOST:$NEO4J_BOLT_PORT
server.bolt.advertised_address=$NEO4J_HOST:$NEO4J_BOLT_PORT
server.http.enabled=true
server.http.listen_address=$NEO4J_HOST:$NEO4J_HTTP_PORT
server.http.advertised_address=$NEO4J_HOST:$NEO4J_HTTP_PORT
server.https.enabled=false
dbms.security.auth_enabled=true

server.directories.data=$state/data
server.directories.logs=$state/logs
server.directories.run=$state/run
server.directories.import=$state/import
server.directories.plugins=$state/plugins

server.memory.heap.initial_size=$NEO4J_HEAP
server.memory.heap.max_size=$NEO4J_HEAP
server.memory.pagecache.size=$NEO4J_PAGECACHE
dbms.usage_report.enabled=false

# Bolt waits 5s twice for idle connections/threads on shutdown; 1s is plenty here.
internal.server.bolt.thread_pool_shutdown_wait_time=1s
internal.server.bolt.connection_shutdown_wait_time=1s
EOF
}

# Pid of the server of state dir $1 when it runs, else nothing (return 1). Checks
# the command line so a recycled pid is never mistaken for the server.
server_pid() {
  local state="$1" pid
  pid="$(cat "$state/neo4j.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  local cmdline
  cmdline="$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  grep -qxF -- "$MAIN_CLASS" <<<"$cmdline" || return 1
  grep -qxF -- "--config-dir=$state/conf" <<<"$cmdline" || return 1
  echo "$pid"
}

# Set the initial password of a not-yet-initialised DBMS (what
# `neo4j-admin dbms set-initial-password` does).
set_initial_password() {
  local state="$1"
  [ "${#NEO4J_PASSWORD}" -ge 8 ] || die "NEO4J_PASSWORD must have at least 8 characters"
  [ "$NEO4J_USER" = neo4j ] || die "only the built-in user 'neo4j' is supported (NEO4J_USER=$NEO4J_USER)"
  set_jvm_opts
  NEO4J_HOME="$DIST_DIR" NEO4J_CONF="$state/conf" \
    "$(java_bin)" -Xmx128m "${JVM_OPTS[@]}" -cp "$(classpath "$state")" "$ADMIN_CLASS" \
    dbms set-initial-password "$NEO4J_PASSWORD" </dev/null >"$state/logs/set-initial-password.log" 2>&1 ||
    { cat "$state/logs/set-initial-password.log" >&2; die "set-initial-password failed"; }
}

# Poll until HTTP and Bolt answer, the process dies, or the deadline passes.
wait_ready() {
  local state="$1" pid="$2" deadline=$((SECONDS + NEO4J_START_TIMEOUT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$state/logs/console.log" "$state/logs/neo4j.log" >&2 2>/dev/null || true
      die "server exited during start-up (logs: $state/logs)"
    fi
    if curl -sf -o /dev/null --max-time 2 "http://$NEO4J_HOST:$NEO4J_HTTP_PORT/" &&
      port_open "$NEO4J_BOLT_PORT"; then
      return 0
    fi
    sleep 0.25
  done
  die "server not ready after ${NEO4J_START_TIMEOUT}s (logs: $state/logs)"
}

# Start the server for state dir $1 (extra JVM options may follow) and wait for it.
server_start() {
  local state="$1"
  shift
  local pid
  if pid="$(server_pid "$state")"; then
    log "already running (pid $pid)"
    wait_ready "$state" "$pid"
    return 0
  fi
  local port
  for port in "$NEO4J_BOLT_PORT" "$NEO4J_HTTP_PORT"; do
    ! port_open "$port" || die "port $NEO4J_HOST:$port is already in use"
  done
  write_conf "$state"
  # A fresh DBMS (no system database yet) gets its password before the first start.
  [ -d "$state/data/databases/system" ] || set_initial_password "$state"

  set_jvm_opts
  rm -f "$state/neo4j.pid"
  # setsid + nohup: the server outlives this script and the caller's terminal.
  # The inner shell records its own pid and execs java, so the pid file holds
  # the server's pid even when setsid has to fork.
  # shellcheck disable=SC2016 # $$, $0 and $@ belong to the inner shell
  setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$state/neo4j.pid" \
    "$(java_bin)" -Xms"$NEO4J_HEAP" -Xmx"$NEO4J_HEAP" "${JVM_OPTS[@]}" "$@" \
    -XX:+ExitOnOutOfMemoryError \
    -Djdk.nio.maxCachedBufferSize=1024 -Dio.netty.tryReflectionSetAccessible=true \
    --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED \
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED -Dlog4j2.disable.jmx=true \
    -cp "$(classpath "$state")" "$MAIN_CLASS" \
    --home-dir="$DIST_DIR" --config-dir="$state/conf" \
    </dev/null >"$state/logs/console.log" 2>&1 9>&- &
  pid=""
  local deadline=$((SECONDS + 10))
  until [ -n "$pid" ] || [ "$SECONDS" -ge "$deadline" ]; do
    sleep 0.05
    pid="$(cat "$state/neo4j.pid" 2>/dev/null || true)"
  done
  [ -n "$pid" ] || die "server process did not start (logs: $state/logs)"
  wait_ready "$state" "$pid"
}

# Stop the server of state dir $1: SIGTERM (clean shutdown + checkpoint), bounded
# wait, SIGKILL only as a last resort.
server_stop() {
  local state="$1" pid deadline
  if pid="$(server_pid "$state")"; then
    kill -TERM "$pid"
    deadline=$((SECONDS + NEO4J_STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "warning: no clean stop after ${NEO4J_STOP_TIMEOUT}s; killing pid $pid"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$state/neo4j.pid"
}

# cypher-shell against the server of state dir $1; remaining args go to cypher-shell.
run_cypher_shell() {
  local state="$1"
  shift
  set_jvm_opts
  "$(java_bin)" -Xmx128m "${JVM_OPTS[@]}" -cp "$(classpath "$state")" "$SHELL_CLASS" \
    -a "bolt://$NEO4J_HOST:$NEO4J_BOLT_PORT" -u "$NEO4J_USER" -p "$NEO4J_PASSWORD" \
    --non-interactive "$@"
}

# --- commands -----------------------------------------------------------------

cmd_start() {
  cmd_install
  local t0=$SECONDS
  server_start "$STATE_DIR"
  log "Neo4j $NEO4J_VERSION ready in $((SECONDS - t0))s: bolt://$NEO4J_HOST:$NEO4J_BOLT_PORT" \
    "http://$NEO4J_HOST:$NEO4J_HTTP_PORT/browser/ (state: $STATE_DIR)"
}

cmd_stop() {
  local keep=0
  case "${1:-}" in
    --keep) keep=1 ;;
    "") ;;
    *) die "usage: stop [--keep]" ;;
  esac
  server_stop "$STATE_DIR"
  if [ "$keep" -eq 0 ]; then
    rm -rf "$STATE_DIR"
    log "stopped; state wiped"
  else
    log "stopped; state kept in $STATE_DIR"
  fi
}

cmd_status() {
  local pid
  if pid="$(server_pid "$STATE_DIR")"; then
    echo "running pid=$pid bolt=$NEO4J_HOST:$NEO4J_BOLT_PORT http=$NEO4J_HOST:$NEO4J_HTTP_PORT state=$STATE_DIR"
    return 0
  fi
  echo "not running (state=$STATE_DIR)"
  return 3
}

cmd_env() {
  printf 'export NEO4J_URI=%q\n' "bolt://$NEO4J_HOST:$NEO4J_BOLT_PORT"
  printf 'export NEO4J_USER=%q\n' "$NEO4J_USER"
  printf 'export NEO4J_PASSWORD=%q\n' "$NEO4J_PASSWORD"
  # The variable the tuner reads by default (settings knowledge.password_env).
  printf 'export TUNER_NEO4J_PASSWORD=%q\n' "$NEO4J_PASSWORD"
  printf 'export NEO4J_HTTP=%q\n' "http://$NEO4J_HOST:$NEO4J_HTTP_PORT"
}

cmd_cypher() {
  server_pid "$STATE_DIR" >/dev/null || die "not running; run '$0 start' first"
  run_cypher_shell "$STATE_DIR" "$@"
}

main() {
  local cmd="${1:-}"
  [ $# -gt 0 ] && shift
  case "$cmd" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status ;;
    env) cmd_env ;;
    cypher) cmd_cypher "$@" ;;
    *)
      echo "usage: $0 install|start|stop [--keep]|status|env|cypher [cypher-shell args]" >&2
      exit 2
      ;;
  esac
}

main "$@"
