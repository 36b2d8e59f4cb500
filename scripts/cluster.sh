#!/usr/bin/env bash
# scripts/cluster.sh — a real Kubernetes control plane with KWOK fake nodes, on
# loopback, from locally built binaries (nothing is downloaded but Go modules).
#
#   scripts/cluster.sh build              build (or reuse) the cached binaries
#   scripts/cluster.sh build-helm         build (or reuse) the cached helm binary
#   scripts/cluster.sh up                 build if needed, start, wait until usable
#   scripts/cluster.sh down               stop everything, remove runtime state
#   scripts/cluster.sh status             print whether the cluster is up (exit 0 if up)
#   scripts/cluster.sh env                print `export KUBECONFIG=...` etc. (eval it)
#   scripts/cluster.sh restart-apiserver [--hard]  restart kube-apiserver (etcd data
#                                     kept; --hard = SIGKILL), then the components
#                                     that watch it
#   scripts/cluster.sh kubectl ARGS...    run the cached kubectl against the cluster
#   scripts/cluster.sh karpenter up|down  Karpenter's KWOK provider beside the running cluster
#                                     (its CRDs applied; TUNER_KARPENTER_INSTANCE_TYPES names
#                                     an instance-types file, else the provider's own list)
#
# TUNER_METRICS_SERVER=true at `up` also runs metrics-server (kwokctl's metrics-server
# support, pod and node usage from KWOK's resource-usage simulation: the
# kwok.x-k8s.io/usage-cpu and usage-memory pod annotations), so that the real HPA
# controller in kube-controller-manager scales Deployments whose pods run on KWOK nodes.
#
# Components: etcd, kube-apiserver (audit log: every request at Metadata level),
# kube-controller-manager (all default controllers: deployment, replicaset,
# garbage collector, disruption, serviceaccount, ...), kube-scheduler and the
# kwok controller (manages ALL nodes, default node/pod stages: fake nodes become
# Ready, pods bound to them become Running and Ready). kwokctl's "binary"
# runtime runs them as plain processes, pointed at the binaries built here.
#
# Binaries are built with Go from the module proxy and cached outside the repo
# in ${XDG_CACHE_HOME:-$HOME/.cache}/tuner/k8s/bin/<component>-<version>/.
# Every setting below can be overridden from the environment.
set -euo pipefail
shopt -s nullglob

# ---------------------------------------------------------------- settings --
K8S_VERSION="${TUNER_K8S_VERSION:-v1.33.13}"   # k8s.io/kubernetes release
ETCD_VERSION="${TUNER_ETCD_VERSION:-v3.5.21}"  # the etcd k8s 1.33 is tested with
KWOK_VERSION="${TUNER_KWOK_VERSION:-v0.8.0}"   # sigs.k8s.io/kwok release
HELM_VERSION="${TUNER_HELM_VERSION:-v3.22.0}"  # helm.sh/helm/v3 release (the chart's tests)
METRICS_SERVER_VERSION="${TUNER_METRICS_SERVER_VERSION:-v0.8.0}"  # sigs.k8s.io/metrics-server
KARPENTER_VERSION="${TUNER_KARPENTER_VERSION:-v1.14.1}"  # sigs.k8s.io/karpenter (its kwok provider)

CACHE_ROOT="${TUNER_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tuner/k8s}"
K8S_BIN="$CACHE_ROOT/bin/kubernetes-$K8S_VERSION"
ETCD_BIN="$CACHE_ROOT/bin/etcd-$ETCD_VERSION"
KWOK_BIN="$CACHE_ROOT/bin/kwok-$KWOK_VERSION"
HELM_BIN="$CACHE_ROOT/bin/helm-$HELM_VERSION"
METRICS_SERVER_BIN="$CACHE_ROOT/bin/metrics-server-$METRICS_SERVER_VERSION"
# Karpenter's KWOK provider is also a binary called `kwok`: its own directory, with its CRDs.
KARPENTER_BIN="$CACHE_ROOT/bin/karpenter-kwok-$KARPENTER_VERSION"
SRC_DIR="$CACHE_ROOT/src"   # generated wrapper Go modules
GO_BUILD_CACHE="${TUNER_GOCACHE:-$CACHE_ROOT/go-build}"

CLUSTER_NAME="${TUNER_CLUSTER_NAME:-tuner}"
STATE_DIR="${TUNER_CLUSTER_STATE:-$CACHE_ROOT/run}"   # kwokctl work dir
CLUSTER_DIR="$STATE_DIR/clusters/$CLUSTER_NAME"
KUBECONFIG_PATH="$CLUSTER_DIR/kubeconfig.yaml"
AUDIT_LOG="$CLUSTER_DIR/logs/audit.log"

BIND_ADDRESS=127.0.0.1
APISERVER_PORT="${TUNER_APISERVER_PORT:-16443}"
ETCD_PORT="${TUNER_ETCD_PORT:-12379}"
ETCD_PEER_PORT="${TUNER_ETCD_PEER_PORT:-12380}"
KCM_PORT="${TUNER_KCM_PORT:-10357}"
SCHEDULER_PORT="${TUNER_SCHEDULER_PORT:-10359}"
KWOK_PORT="${TUNER_KWOK_PORT:-10347}"
METRICS_SERVER_PORT="${TUNER_METRICS_SERVER_PORT:-10350}"
KARPENTER_METRICS_PORT="${TUNER_KARPENTER_METRICS_PORT:-18080}"
KARPENTER_HEALTH_PORT="${TUNER_KARPENTER_HEALTH_PORT:-18081}"
WITH_METRICS_SERVER="${TUNER_METRICS_SERVER:-false}"
KARPENTER_INSTANCE_TYPES="${TUNER_KARPENTER_INSTANCE_TYPES:-}"

UP_TIMEOUT="${TUNER_UP_TIMEOUT:-180}"        # seconds to wait for readiness
BUILD_JOBS="${TUNER_BUILD_JOBS:-2}"          # go build -p (machine has 2 cores)
NO_QPS_LIMITS="${TUNER_DISABLE_QPS_LIMITS:-false}"  # true: no client rate limits (bench)

# ----------------------------------------------------------------- helpers --
log() { printf '[cluster.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Seconds since the epoch with sub-second precision (for timing reports).
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Go environment for every build: module mode, no prompts, bounded parallelism.
# GOMODCACHE stays Go's default. The build cache (~4 GiB for these binaries) is
# a private one under $CACHE_ROOT, deleted once every binary is built (set
# TUNER_KEEP_GOCACHE=1 to keep it): only the binaries are worth keeping.
go_env() {
  command -v go >/dev/null || die "go is not installed (need Go >= 1.24)"
  export GOFLAGS="-mod=mod -buildvcs=false"
  export GIT_TERMINAL_PROMPT=0 GO111MODULE=on CGO_ENABLED=0
  export GOMAXPROCS="${GOMAXPROCS:-$BUILD_JOBS}"
  export GOCACHE="$GO_BUILD_CACHE"
}

# Run "$@" while holding an exclusive lock on the cache (parallel `up`s are safe).
with_cache_lock() {
  mkdir -p "$CACHE_ROOT"
  if command -v flock >/dev/null; then
    ( flock 9; "$@" ) 9>"$CACHE_ROOT/.lock"
  else
    "$@"
  fi
}

# go build one main package into an exact path, atomically (tmp + mv).
go_build_to() { # DIR(module) OUT PKG LDFLAGS
  local dir=$1 out=$2 pkg=$3 ldflags=$4 t0
  t0=$(now)
  log "building $(basename "$out") ($pkg)"
  (cd "$dir" && go build -p "$BUILD_JOBS" -trimpath -ldflags "-s -w $ldflags" \
      -o "$out.tmp" "$pkg" </dev/null)
  mv -f "$out.tmp" "$out"
  log "built $(basename "$out") in $(elapsed "$t0")s"
}

# ------------------------------------------------------------------- build --
# Kubernetes cannot be `go install`ed: its go.mod replaces the k8s.io/* staging
# modules with local paths. A wrapper module requires k8s.io/kubernetes and
# replaces every staging module with its published v0.X.Y release instead.
k8s_wrapper_module() {
  local dir=$1 gomod staging minor
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" </dev/null |
          sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
  # v1.33.13 -> v0.33.13 (the staging modules' tag for the same release)
  staging="v0.${K8S_VERSION#v1.}"
  mkdir -p "$dir"
  {
    echo "module tuner.local/kubernetes-build"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    # Lines like "k8s.io/api => ./staging/src/k8s.io/api" in the replace block.
    sed -n '/^replace (/,/^)/s#^[[:space:]]*\([^[:space:]]*\) => \./staging/.*#\1#p' "$gomod" |
      while read -r mod; do echo "	$mod => $mod $staging"; done
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'EOF'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  (cd "$dir" && go mod tidy </dev/null)
}

# -X flags that stamp the version (hack/lib/version.sh does the same), so that
# `kubectl version`, /version and kwokctl's version detection see vX.Y.Z.
k8s_version_ldflags() {
  local major minor v="${K8S_VERSION#v}" flags="" pkg key
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    for key in "gitVersion=$K8S_VERSION" "gitMajor=$major" "gitMinor=$minor" \
               "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
      flags+=" -X $pkg.$key"
    done
  done
  echo "$flags"
}

build_kubernetes() {
  local dir="$SRC_DIR/kubernetes-$K8S_VERSION" cmd t0 ldflags
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if all_present "$K8S_BIN" "${cmds[@]}"; then return; fi
  t0=$(now)
  [[ -f "$dir/go.sum" ]] || k8s_wrapper_module "$dir"
  log "kubernetes wrapper module ready in $(elapsed "$t0")s"
  ldflags=$(k8s_version_ldflags)
  mkdir -p "$K8S_BIN"
  for cmd in "${cmds[@]}"; do
    [[ -x "$K8S_BIN/$cmd" ]] ||
      go_build_to "$dir" "$K8S_BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd" "$ldflags"
  done
}

# etcd: a one-line main around etcdmain.Main, in its own module so that its
# dependency versions never mix with Kubernetes'.
build_etcd() {
  local dir="$SRC_DIR/etcd-$ETCD_VERSION" t0
  if all_present "$ETCD_BIN" etcd; then return; fi
  t0=$(now)
  mkdir -p "$dir" "$ETCD_BIN"
  if [[ ! -f "$dir/go.sum" ]]; then
    cat >"$dir/go.mod" <<EOF
module tuner.local/etcd-build

go 1.23

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
    cat >"$dir/main.go" <<'EOF'
// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
    (cd "$dir" && go mod tidy </dev/null)
  fi
  log "etcd wrapper module ready in $(elapsed "$t0")s"
  go_build_to "$dir" "$ETCD_BIN/etcd" . ""
}

# `go install PKG@VERSION` into DIR/NAME, atomically (GOBIN a temp dir, then mv): for
# modules without replace directives (kwok, helm, metrics-server, Karpenter).
go_install_to() { # DIR NAME PKG@VERSION LDFLAGS
  local dir=$1 name=$2 pkg=$3 ldflags=$4 t0 built
  t0=$(now)
  log "building $name ($pkg)"
  rm -rf "$dir/.tmp" && mkdir -p "$dir/.tmp"
  GOBIN="$dir/.tmp" go install -p "$BUILD_JOBS" -trimpath -ldflags "-s -w $ldflags" \
    "$pkg" </dev/null
  built=("$dir"/.tmp/*)
  mv -f "${built[0]}" "$dir/$name"
  rm -rf "$dir/.tmp"
  log "built $name in $(elapsed "$t0")s"
}

# The module cache directory of MODULE@VERSION (downloaded if needed).
module_dir() { # MODULE@VERSION
  go mod download -json "$1" </dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p'
}

# kwok has no replace directives: plain `go install pkg@version` works.
build_kwok() {
  local tool
  if all_present "$KWOK_BIN" kwok kwokctl; then return; fi
  mkdir -p "$KWOK_BIN"
  for tool in kwok kwokctl; do
    [[ -x "$KWOK_BIN/$tool" ]] && continue
    go_install_to "$KWOK_BIN" "$tool" "sigs.k8s.io/kwok/cmd/$tool@$KWOK_VERSION" \
      "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  done
}

# helm: plain `go install` too. Not part of `build`: only the chart's tests need it
# (`build-helm`, which `make test` runs first). Its own lock and Go build cache, so that it
# neither waits for nor wipes a Kubernetes build running at the same time.
build_helm() {
  all_present "$HELM_BIN" helm && return
  mkdir -p "$HELM_BIN"
  go_install_to "$HELM_BIN" helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
    "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  [[ -n "${TUNER_GOCACHE:-}" ]] || rm -rf "$GOCACHE"
}

cmd_build_helm() {
  if ! all_present "$HELM_BIN" helm; then
    go_env
    [[ -n "${TUNER_GOCACHE:-}" ]] || export GOCACHE="$CACHE_ROOT/go-build-helm"
    mkdir -p "$CACHE_ROOT"
    ( flock 9; build_helm ) 9>"$CACHE_ROOT/.lock-helm"
  fi
  all_present "$HELM_BIN" helm || die "build finished but helm is missing"
}

# metrics-server, version-stamped as its Makefile does (kwokctl reads `--version`), and its
# own kustomize manifests (APIService, Service; kwokctl keeps only those two and points the
# Service at the process) copied beside it: kwokctl's default is a release download.
build_metrics_server() {
  local src
  if all_present "$METRICS_SERVER_BIN" metrics-server && [[ -d "$METRICS_SERVER_BIN/manifests" ]]; then
    return
  fi
  mkdir -p "$METRICS_SERVER_BIN"
  go_install_to "$METRICS_SERVER_BIN" metrics-server \
    "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION" \
    "-X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION"
  src=$(module_dir "sigs.k8s.io/metrics-server@$METRICS_SERVER_VERSION")
  [[ -d "$src/manifests" ]] || die "no manifests in the metrics-server module ($src)"
  rm -rf "$METRICS_SERVER_BIN/manifests"
  cp -r "$src/manifests" "$METRICS_SERVER_BIN/manifests"
  chmod -R u+w "$METRICS_SERVER_BIN/manifests"
}

# Karpenter's KWOK provider (sigs.k8s.io/karpenter/kwok: Karpenter's controllers with a cloud
# provider that creates KWOK Node objects) and its CRDs from the module cache: NodePool,
# NodeClaim, NodeOverlay, CapacityBuffer (pkg/apis/crds) and KWOKNodeClass
# (kwok/apis/crds; the chart's copy is a symlink the module zip drops).
build_karpenter() {
  local src
  if all_present "$KARPENTER_BIN" kwok && [[ -d "$KARPENTER_BIN/crds" ]]; then return; fi
  mkdir -p "$KARPENTER_BIN"
  go_install_to "$KARPENTER_BIN" kwok "sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION" \
    "-X sigs.k8s.io/karpenter/pkg/operator.Version=$KARPENTER_VERSION"
  src=$(module_dir "sigs.k8s.io/karpenter@$KARPENTER_VERSION")
  rm -rf "$KARPENTER_BIN/crds.tmp" && mkdir -p "$KARPENTER_BIN/crds.tmp"
  cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$KARPENTER_BIN/crds.tmp/"
  chmod -R u+w "$KARPENTER_BIN/crds.tmp"
  rm -rf "$KARPENTER_BIN/crds" && mv "$KARPENTER_BIN/crds.tmp" "$KARPENTER_BIN/crds"
}

all_present() { # DIR NAME...
  local dir=$1; shift
  local name
  for name in "$@"; do [[ -x "$dir/$name" ]] || return 1; done
}

# What `up` needs: the control plane, kwok, and metrics-server when TUNER_METRICS_SERVER=true.
binaries_present() {
  all_present "$K8S_BIN" kube-apiserver kube-controller-manager kube-scheduler kubectl &&
    all_present "$ETCD_BIN" etcd && all_present "$KWOK_BIN" kwok kwokctl &&
    { [[ "$WITH_METRICS_SERVER" != true ]] || metrics_server_present; }
}

metrics_server_present() {
  all_present "$METRICS_SERVER_BIN" metrics-server && [[ -d "$METRICS_SERVER_BIN/manifests" ]]
}

karpenter_present() {
  all_present "$KARPENTER_BIN" kwok && [[ -d "$KARPENTER_BIN/crds" ]]
}

# Everything `build` builds: what `up` needs, metrics-server and Karpenter's KWOK provider.
everything_present() {
  binaries_present && metrics_server_present && karpenter_present
}

build_all() { # [--up]: only what `up` needs
  local t0
  t0=$(now)
  go_env
  build_etcd
  build_kwok
  build_kubernetes
  if [[ "${1:-}" != --up || "$WITH_METRICS_SERVER" == true ]]; then build_metrics_server; fi
  [[ "${1:-}" == --up ]] || build_karpenter
  log "binaries ready in $(elapsed "$t0")s ($CACHE_ROOT/bin)"
  drop_go_cache
}

# Only the binaries are worth keeping (TUNER_KEEP_GOCACHE=1 keeps the build cache).
drop_go_cache() {
  if [[ "${TUNER_KEEP_GOCACHE:-0}" != 1 && -z "${TUNER_GOCACHE:-}" ]]; then
    rm -rf "$GO_BUILD_CACHE"
  fi
}

cmd_build() {
  everything_present || with_cache_lock build_all
  everything_present || die "build finished but binaries are missing"
}

# The binaries `up` needs (Karpenter's are built by `karpenter up`, or `build`).
build_for_up() {
  binaries_present || with_cache_lock build_all --up
  binaries_present || die "build finished but binaries are missing"
}

# ----------------------------------------------------------------- runtime --
kwokctl() {
  KWOK_WORKDIR="$STATE_DIR" "$KWOK_BIN/kwokctl" --name "$CLUSTER_NAME" "$@" </dev/null
}

kubectl_() {
  "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"
}

# kwokctl reads $KWOK_WORKDIR/kwok.yaml by default: everything it needs (runtime,
# binaries, ports, audit policy) is set there, so it never downloads anything.
write_kwokctl_config() {
  mkdir -p "$STATE_DIR"
  cat >"$STATE_DIR/audit-policy.yaml" <<'EOF'
# Every request, at Metadata level (who, verb, resource, response code).
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Metadata
EOF
  cat >"$STATE_DIR/kwok.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  kubeVersion: $K8S_VERSION
  etcdVersion: ${ETCD_VERSION#v}
  bindAddress: $BIND_ADDRESS
  kubeApiserverPort: $APISERVER_PORT
  etcdPort: $ETCD_PORT
  etcdPeerPort: $ETCD_PEER_PORT
  kubeControllerManagerPort: $KCM_PORT
  kubeSchedulerPort: $SCHEDULER_PORT
  kwokControllerPort: $KWOK_PORT
  kubeAuditPolicy: $STATE_DIR/audit-policy.yaml
  cacheDir: $STATE_DIR/cache
  quietPull: true
  disableQPSLimits: $NO_QPS_LIMITS
  etcdBinary: $ETCD_BIN/etcd
  kubeApiserverBinary: $K8S_BIN/kube-apiserver
  kubeControllerManagerBinary: $K8S_BIN/kube-controller-manager
  kubeSchedulerBinary: $K8S_BIN/kube-scheduler
  kubectlBinary: $K8S_BIN/kubectl
  kwokControllerBinary: $KWOK_BIN/kwok
$(metrics_server_options)
componentsPatches:
  # Nothing restarts a component that exits here, and with leader election on,
  # kube-controller-manager and kube-scheduler exit ("leaderelection lost")
  # once the api server is down for ~10s: run them as the only, always-active
  # instance instead, so they survive restart-apiserver.
  - name: kube-controller-manager
    extraArgs:
      - {key: leader-elect, value: "false"}
  - name: kube-scheduler
    extraArgs:
      - {key: leader-elect, value: "false"}
  # etcd's default 2 GiB backend quota fills with 5,000 nodes' pods (bench/live_scale.py).
  - name: etcd
    extraArgs:
      - {key: quota-backend-bytes, value: "8589934592"}
  # On SIGTERM the api server otherwise waits up to 60s for open watch streams;
  # with a grace period it ends them and exits within seconds.
  - name: kube-apiserver
    extraArgs:
      - {key: shutdown-watch-termination-grace-period, value: 3s}
EOF
}

# kwokctl's options for metrics-server (TUNER_METRICS_SERVER=true): the binary and
# manifests built here. kwokctl then also gives kwok its resource-metrics endpoint and the
# usage-from-annotation ClusterResourceUsage (both compiled into kwokctl, nothing fetched).
metrics_server_options() {
  [[ "$WITH_METRICS_SERVER" == true ]] || return 0
  cat <<EOF
  enableMetricsServer: true
  metricsServerVersion: $METRICS_SERVER_VERSION
  metricsServerBinary: $METRICS_SERVER_BIN/metrics-server
  metricsServerPort: $METRICS_SERVER_PORT
  metricsServerManifests:
    - $METRICS_SERVER_BIN/manifests/overlays/release
EOF
}

apiserver_ready() {
  [[ -f "$KUBECONFIG_PATH" ]] && kubectl_ get --raw /readyz --request-timeout=3s >/dev/null 2>&1
}

# Poll until ready or the deadline passes: /readyz, then the default namespace
# and its ServiceAccount (created by kube-controller-manager).
wait_ready() { # TIMEOUT_SECONDS
  local deadline=$((SECONDS + $1))
  until apiserver_ready; do
    ((SECONDS < deadline)) || die "kube-apiserver not ready after $1s (logs: $CLUSTER_DIR/logs)"
    sleep 0.5
  done
  until kubectl_ get serviceaccount default -n default >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "default ServiceAccount missing after $1s (logs: $CLUSTER_DIR/logs)"
    sleep 0.5
  done
}

cmd_up() {
  local t0
  t0=$(now)
  build_for_up
  if apiserver_ready; then
    log "cluster $CLUSTER_NAME is already up"
    cmd_env
    return
  fi
  if [[ -d "$CLUSTER_DIR" ]]; then
    # Left over from a crash or an interrupted `up`: start from scratch.
    log "removing stale cluster state in $CLUSTER_DIR"
    cmd_down
  fi
  write_kwokctl_config
  log "starting cluster $CLUSTER_NAME (api server https://$BIND_ADDRESS:$APISERVER_PORT)"
  # --kubeconfig='' : don't touch ~/.kube/config; the cluster has its own file.
  if ! kwokctl create cluster --kubeconfig='' --timeout "${UP_TIMEOUT}s" >"$STATE_DIR/create.log" 2>&1; then
    cat "$STATE_DIR/create.log" >&2
    die "kwokctl create cluster failed"
  fi
  wait_ready "$UP_TIMEOUT"
  log "cluster up in $(elapsed "$t0")s"
  cmd_env
}

cmd_down() {
  cmd_karpenter_down 2>/dev/null
  # Every component at once, a short grace, then SIGKILL: the state is deleted below, so
  # kube-apiserver's graceful shutdown (about 20 s, one after the other: 35 s) buys nothing.
  local pidfile pids=()
  if [[ -d "$CLUSTER_DIR/pids" ]]; then
    for pidfile in "$CLUSTER_DIR"/pids/*.pid; do
      [[ -f "$pidfile" ]] && pids+=("$(cat "$pidfile")")
    done
  fi
  stop_pids "${TUNER_DOWN_GRACE_S:-3}" "${pids[@]}"
  if [[ -x "$KWOK_BIN/kwokctl" && -d "$CLUSTER_DIR" ]]; then
    kwokctl delete cluster --kubeconfig='' >/dev/null 2>&1 || true
  fi
  rm -rf "$CLUSTER_DIR"
  log "cluster $CLUSTER_NAME is down"
}

# SIGTERM, wait up to GRACE seconds (default 20), then SIGKILL.
stop_pids() { # GRACE PID...: SIGTERM to all, SIGKILL to those left after GRACE seconds
  local grace=$1 pid i alive
  shift
  for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
  for ((i = 0; i < grace * 10; i++)); do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && return 0
    sleep 0.1
  done
  for pid in "$@"; do kill -9 "$pid" 2>/dev/null || true; done
}

stop_pid() { # PID [GRACE]
  stop_pids "${2:-20}" "$1"
}

cmd_status() {
  if apiserver_ready; then
    echo "up: cluster $CLUSTER_NAME at https://$BIND_ADDRESS:$APISERVER_PORT ($K8S_VERSION)"
    local pidfile name
    for pidfile in "$CLUSTER_DIR"/pids/*.pid; do
      name=$(basename "$pidfile" .pid)
      if kill -0 "$(cat "$pidfile")" 2>/dev/null; then echo "  $name: running"; else echo "  $name: NOT running"; fi
    done
  else
    echo "down: cluster $CLUSTER_NAME"
    return 1
  fi
}

cmd_env() {
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
  echo "export TUNER_AUDIT_LOG=$AUDIT_LOG"
  echo "export TUNER_KUBECTL=$K8S_BIN/kubectl"
  echo "export TUNER_CLUSTER_LOGS=$CLUSTER_DIR/logs"
  echo "export TUNER_HELM=$HELM_BIN/helm"
}

# Restart kube-apiserver; etcd (and so every object) is kept. `--hard` kills it
# with SIGKILL (a crash) instead of a graceful SIGTERM. kwokctl has no
# per-component restart, but `kwokctl start cluster` starts exactly the
# components whose process is gone, with the same command line, log file and
# pid file as at `up`.
#
# kube-controller-manager and kube-scheduler are restarted after it. Left
# running, each of their informers retries with client-go's backoff (up to 30s,
# jittered up to twice that, and not reset for 2 minutes), so for a minute or
# more after the api server is back a controller may not see a new object: a
# scaled ReplicaSet gets no new pods, a new node no pods scheduled. Whatever
# runs next needs a whole control plane, not one still catching up. The kwok
# controller keeps running: it holds each node's Lease under its own instance
# id, and a new instance does not take a node over while that Lease is valid.
WATCHERS=(kube-controller-manager kube-scheduler)

cmd_restart_apiserver() {
  local pids="$CLUSTER_DIR/pids" pid t0 name
  [[ -d "$CLUSTER_DIR" ]] || die "cluster $CLUSTER_NAME is not up"
  t0=$(now)
  if [[ -f "$pids/kube-apiserver.pid" ]]; then
    pid=$(cat "$pids/kube-apiserver.pid")
    if [[ "${1:-}" == --hard ]]; then
      log "killing kube-apiserver (pid $pid, SIGKILL)"
      kill -9 "$pid" 2>/dev/null || true
    else
      log "stopping kube-apiserver (pid $pid, SIGTERM)"
    fi
    stop_pid "$pid" 15
    rm -f "$pids/kube-apiserver.pid"
  fi
  start_missing
  log "kube-apiserver (pid $(cat "$pids/kube-apiserver.pid")) ready again after $(elapsed "$t0")s"
  for name in "${WATCHERS[@]}"; do
    [[ -f "$pids/$name.pid" ]] && stop_pid "$(cat "$pids/$name.pid")" 15
    rm -f "$pids/$name.pid"
  done
  start_missing
  wait_healthy "$UP_TIMEOUT" "$KCM_PORT" "$SCHEDULER_PORT"
  log "${WATCHERS[*]} restarted after $(elapsed "$t0")s"
}

# Start the components whose process is gone; wait until the api server is ready.
start_missing() {
  kwokctl start cluster --timeout "${UP_TIMEOUT}s" >>"$STATE_DIR/create.log" 2>&1 ||
    die "kwokctl start cluster failed (see $STATE_DIR/create.log)"
  wait_ready "$UP_TIMEOUT"
}

# Poll each PORT's /healthz until it answers ok or TIMEOUT_SECONDS pass.
wait_healthy() { # TIMEOUT_SECONDS PORT...
  local timeout=$1 deadline=$((SECONDS + $1)) port
  shift
  for port in "$@"; do
    until [[ "$(curl -sk --max-time 3 "https://$BIND_ADDRESS:$port/healthz")" == ok ]]; do
      ((SECONDS < deadline)) || die "no healthy component on port $port after ${timeout}s (logs: $CLUSTER_DIR/logs)"
      sleep 0.2
    done
  done
}

# ---------------------------------------------------------------- karpenter --
# Karpenter's KWOK provider as a plain process beside the cluster, pointed at its api
# server: leader election off (the only instance), its metrics and health ports set (it
# binds them on every interface: the operator hard-codes ":PORT"), the instance types of
# TUNER_KARPENTER_INSTANCE_TYPES. Its NodePools and KWOKNodeClasses are the caller's.
KARPENTER_PID="$CLUSTER_DIR/karpenter.pid"
KARPENTER_LOG="$CLUSTER_DIR/logs/karpenter.log"

karpenter_ready() {
  [[ "$(curl -s --max-time 3 "http://$BIND_ADDRESS:$KARPENTER_HEALTH_PORT/readyz")" == ok ]]
}

cmd_karpenter_up() {
  local t0 deadline env_file=()
  t0=$(now)
  apiserver_ready || die "cluster $CLUSTER_NAME is not up (scripts/cluster.sh up first)"
  if [[ -f "$KARPENTER_PID" ]] && kill -0 "$(cat "$KARPENTER_PID")" 2>/dev/null; then
    log "karpenter is already running (pid $(cat "$KARPENTER_PID"))"
    return
  fi
  if ! karpenter_present; then
    go_env
    with_cache_lock build_karpenter
    drop_go_cache
  fi
  kubectl_ apply --server-side --force-conflicts -f "$KARPENTER_BIN/crds" >/dev/null
  kubectl_ wait --for condition=established --timeout=60s -f "$KARPENTER_BIN/crds" >/dev/null
  if [[ -n "$KARPENTER_INSTANCE_TYPES" ]]; then
    [[ -f "$KARPENTER_INSTANCE_TYPES" ]] || die "no instance-types file $KARPENTER_INSTANCE_TYPES"
    env_file=(INSTANCE_TYPES_FILE_PATH="$KARPENTER_INSTANCE_TYPES")
  fi
  mkdir -p "$(dirname "$KARPENTER_LOG")"
  env KUBECONFIG="$KUBECONFIG_PATH" DISABLE_LEADER_ELECTION=true \
    METRICS_PORT="$KARPENTER_METRICS_PORT" HEALTH_PROBE_PORT="$KARPENTER_HEALTH_PORT" \
    LOG_LEVEL="${TUNER_KARPENTER_LOG_LEVEL:-info}" "${env_file[@]}" \
    setsid "$KARPENTER_BIN/kwok" >"$KARPENTER_LOG" 2>&1 </dev/null &
  echo $! >"$KARPENTER_PID"
  deadline=$((SECONDS + UP_TIMEOUT))
  until karpenter_ready; do
    kill -0 "$(cat "$KARPENTER_PID")" 2>/dev/null ||
      { tail -20 "$KARPENTER_LOG" >&2; die "karpenter exited (log: $KARPENTER_LOG)"; }
    ((SECONDS < deadline)) || die "karpenter not ready after ${UP_TIMEOUT}s (log: $KARPENTER_LOG)"
    sleep 0.5
  done
  log "karpenter up in $(elapsed "$t0")s (health :$KARPENTER_HEALTH_PORT, metrics :$KARPENTER_METRICS_PORT)"
}

cmd_karpenter_down() {
  if [[ -f "$KARPENTER_PID" ]]; then
    stop_pid "$(cat "$KARPENTER_PID")" 20
    rm -f "$KARPENTER_PID"
  fi
  log "karpenter is down"
}

usage() {
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    build) cmd_build ;;
    build-helm) cmd_build_helm ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    restart-apiserver) cmd_restart_apiserver "$@" ;;
    karpenter)
      case "${1:-}" in
        up) cmd_karpenter_up ;;
        down) cmd_karpenter_down ;;
        *) usage >&2; exit 2 ;;
      esac ;;
    kubectl) exec "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@" ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
