#!/usr/bin/env bash
# Builds the real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) and kwok from the Go module proxy into a cache outside the checkout, keyed by
# version, so that a fresh clone (CI) reuses what an earlier run built.
#
# Usage: hack/controlplane.sh [assets|all]   (assets: etcd + kube-apiserver, enough for envtest)
# Prints the assets folder (KUBEBUILDER_ASSETS) on its last line of stdout, and nothing else
# there: progress goes to stderr, so `hack/controlplane.sh all >/dev/null` still shows it.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
KWOK_VERSION=v0.8.0
CACHE=${MODELSHIP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelship}
DIR="$CACHE/controlplane/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
HERE=$(cd "$(dirname "$0")" && pwd)
what=${1:-assets}

log() { printf '[controlplane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$DIR"

# Say up front what a first run is about to do (it takes long, once).
wanted="etcd kube-apiserver"
if [ "$what" = all ]; then wanted="$wanted kube-controller-manager kube-scheduler kwok"; fi
missing=""
for b in $wanted; do [ -x "$DIR/$b" ] || missing="$missing $b"; done
if [ -n "$missing" ]; then
	log "first run: building${missing} from the Go module proxy into $DIR (about 25 minutes on 2 cores for all of them; cached for later runs and fresh clones); progress follows"
fi

# build MODULE_DIR PACKAGE BINARY LDFLAGS: go build with a progress line every 5% of packages.
build() {
	local mod=$1 pkg=$2 bin=$3 ldflags=$4
	if [ -x "$DIR/$bin" ]; then return 0; fi
	local total start
	start=$(date +%s)
	log "resolving the packages of $bin (downloads its modules on a first run)"
	total=$(cd "$mod" && go list -deps "$pkg" | wc -l)
	log "building $bin from $pkg ($total packages; a cold kube-apiserver takes ~20 min on 2 cores, later builds reuse Go's cache)"
	(cd "$mod" && go build -v -ldflags "$ldflags" -o "$DIR/$bin.tmp" "$pkg" 2>&1) |
		awk -v total="$total" -v bin="$bin" -v start="$start" '
			/^#|\.go:[0-9]+:/ { print > "/dev/stderr" }
			{ n++; pct = int(100 * n / total); if (pct >= last + 5) { last = pct;
			  printf "[controlplane] %s: %d/%d packages compiled (%d%%), %ds elapsed\n", bin, n, total, pct, systime() - start > "/dev/stderr"; fflush("/dev/stderr") } }'
	[ "${PIPESTATUS[0]}" -eq 0 ] || { log "build of $bin failed"; exit 1; }
	mv "$DIR/$bin.tmp" "$DIR/$bin"
	log "built $bin in $(( $(date +%s) - start ))s"
}

kver="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

build "$HERE/tools/etcd" go.etcd.io/etcd/server/v3 etcd "-s -w"
build "$HERE/tools/kube" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kver"
if [ "$what" = all ]; then
	build "$HERE/tools/kube" k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$kver"
	build "$HERE/tools/kube" k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$kver"
	if [ ! -x "$DIR/kwok" ]; then
		log "installing kwok ${KWOK_VERSION} (~3 min cold; a line every 20 packages)"
		kstart=$(date +%s)
		(GOBIN="$DIR" go install -v "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" 2>&1) |
			awk -v start="$kstart" '/^go: |\.go:[0-9]+:/ { print > "/dev/stderr"; next }
				{ n++; if (n % 20 == 0) { printf "[controlplane] kwok: %d packages compiled, %ds elapsed\n", n, systime() - start > "/dev/stderr"; fflush("/dev/stderr") } }'
		[ "${PIPESTATUS[0]}" -eq 0 ] || { log "install of kwok failed"; exit 1; }
		log "installed kwok in $(( $(date +%s) - kstart ))s"
	fi
	# kwok's stages: node-initialize (fast), node-heartbeat-with-lease, pod-ready, pod-complete,
	# pod-delete (fast); the kustomization files are not stages.
	stages="$DIR/kwok-stages"
	if [ ! -f "$stages/node-heartbeat-with-lease.yaml" ] || [ -f "$stages/kustomization.yaml" ]; then
		src=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
		rm -rf "$stages.tmp" && mkdir -p "$stages.tmp"
		for d in node/fast node/heartbeat-with-lease pod/fast; do
			find "$src/kustomize/stage/$d" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml -exec cp {} "$stages.tmp"/ \;
		done
		rm -rf "$stages" && mv "$stages.tmp" "$stages"
	fi
fi
echo "$DIR"
