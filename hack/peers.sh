#!/usr/bin/env bash
# Builds the real peers modelship is measured against (make bench-peers) from the Go module
# proxy, once, into a cache outside the checkout keyed by version, like hack/controlplane.sh:
#   Flagger v1.36.1      (go install; ~3 min cold, 78 MB)
#   KEDA v2.21.0         operator and metrics adapter (hack/tools/keda; ~12 + 2 min cold)
#   Argo Rollouts v1.10.1 controller (hack/tools/argo-rollouts, which carries its replace lines;
#                        1700 packages; 15 min cold at nice 19 beside KEDA's build, 2 cores), its
#                        CRDs from the module's manifests/crds, and Traefik v3.6.12's traefik.io
#                        CRDs (hack/tools/traefik's module) for the TraefikService it writes
# Builds run at nice 19 so that they do not starve tests sharing the machine.
#
# Usage: hack/peers.sh [flagger|keda|argo-rollouts|all ...]   Prints the peers folder on its last
# line of stdout; progress goes to stderr.
#        hack/peers.sh for [modelship-bench peers flags]   only the peers the flags' --contenders
# run (its default without the flag: keda-hpa and flagger) and those its --smoke (Flagger and
# KEDA) or --flagger-smoke (Flagger) start, as make bench-peers calls it with
# PEERS_FLAGS: a run of two contenders does not build the others (KEDA and Argo Rollouts are
# 12-15 minutes cold). With PEERS_PLAN=1 it prints the peers it would build and builds nothing.
set -euo pipefail

FLAGGER_VERSION=v1.36.1
KEDA_VERSION=v2.21.0
ARGO_ROLLOUTS_VERSION=v1.10.1 # v1.10.2 needs a newer Go than 1.26.8
CACHE=${MODELSHIP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelship}
DIR="$CACHE/peers"
HERE=$(cd "$(dirname "$0")" && pwd)
what=${*:-all}
if [ "${1:-}" = for ]; then
	shift
	contenders=modelship,modelship-recipe,keda-hpa,flagger # modelship-bench peers' default
	smoke="" # the peers the smoke tests start whatever the contenders (modelship-bench peers)
	while [ $# -gt 0 ]; do
		case $1 in
		--contenders | -contenders) contenders=${2:-}; shift ;;
		--contenders=* | -contenders=*) contenders=${1#*=} ;;
		--smoke | -smoke | --smoke=true | -smoke=true) smoke="$smoke flagger keda" ;;
		--flagger-smoke | -flagger-smoke | --flagger-smoke=true | -flagger-smoke=true) smoke="$smoke flagger" ;;
		esac
		shift
	done
	what=""
	for c in ${contenders//,/ }; do
		case $c in
		flagger) what="$what flagger" ;;
		keda-hpa) what="$what keda" ;;
		argo-rollouts) what="$what argo-rollouts" ;;
		esac
	done
	for p in $smoke; do
		case " $what " in *" $p "*) ;; *) what="$what $p" ;; esac
	done
fi
if [ "${PEERS_PLAN:-}" = 1 ]; then
	echo "${what# }"
	exit 0
fi
# want PEER: whether PEER is to be built.
want() { case " $what " in *" all "* | *" $1 "*) return 0 ;; *) return 1 ;; esac; }

log() { printf '[peers %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$DIR"

# build OUT_DIR BINARY: builds with a progress line every 5% of packages; the rest of the args
# are the go command (run in the current directory).
build() {
	local out=$1 bin=$2 pkg=$3
	shift 3
	if [ -x "$out/$bin" ]; then return 0; fi
	mkdir -p "$out"
	local total start
	start=$(date +%s)
	log "resolving the packages of $bin (downloads its modules on a first run)"
	total=$(go list -deps "$pkg" 2>/dev/null | wc -l)
	log "building $bin ($total packages) into $out"
	(nice -n 19 go build -v -trimpath -ldflags "-s -w" -o "$out/$bin.tmp" "$pkg" 2>&1) |
		awk -v total="$total" -v bin="$bin" -v start="$start" '
			/^#|\.go:[0-9]+:/ { print > "/dev/stderr" }
			{ n++; pct = int(100 * n / (total > 0 ? total : 1)); if (pct >= last + 5) { last = pct;
			  printf "[peers] %s: %d/%d packages compiled (%d%%), %ds elapsed\n", bin, n, total, pct, systime() - start > "/dev/stderr"; fflush("/dev/stderr") } }'
	[ "${PIPESTATUS[0]}" -eq 0 ] || { log "build of $bin failed"; exit 1; }
	mv "$out/$bin.tmp" "$out/$bin"
	log "built $bin in $(( $(date +%s) - start ))s"
}

if want flagger; then
	out="$DIR/flagger-$FLAGGER_VERSION"
	if [ ! -x "$out/flagger" ]; then
		mkdir -p "$out"
		start=$(date +%s)
		log "installing flagger $FLAGGER_VERSION into $out (~3 min cold, ~900 packages; a line every 50)"
		(GOBIN="$out" nice -n 19 go install -v -trimpath -ldflags "-s -w" "github.com/fluxcd/flagger/cmd/flagger@$FLAGGER_VERSION" 2>&1) |
			awk -v start="$start" '/^#|\.go:[0-9]+:|^go: / { print > "/dev/stderr" }
				{ n++; if (n % 50 == 0) { printf "[peers] flagger: %d packages compiled, %ds elapsed\n", n, systime() - start > "/dev/stderr"; fflush("/dev/stderr") } }'
		[ "${PIPESTATUS[0]}" -eq 0 ] || { log "install of flagger failed"; exit 1; }
		log "built flagger in $(( $(date +%s) - start ))s"
	fi
	if [ ! -f "$out/crd.yaml" ]; then
		# Flagger's CRDs ship in its module zip.
		GOFLAGS=-mod=mod go mod download -json "github.com/fluxcd/flagger@$FLAGGER_VERSION" >"$out/.mod.json"
		mod=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' "$out/.mod.json")
		cp "$mod/artifacts/flagger/crd.yaml" "$out/crd.yaml" && chmod 0644 "$out/crd.yaml"
		rm -f "$out/.mod.json"
	fi
fi
if want keda; then
	out="$DIR/keda-$KEDA_VERSION"
	(cd "$HERE/tools/keda" &&
		build "$out" keda-operator github.com/kedacore/keda/v2/cmd/operator &&
		build "$out" keda-adapter github.com/kedacore/keda/v2/cmd/adapter)
	if [ ! -d "$out/crds" ]; then
		mod=$(cd "$HERE/tools/keda" && go list -m -f '{{.Dir}}' github.com/kedacore/keda/v2)
		mkdir -p "$out/crds" && cp "$mod"/config/crd/bases/*.yaml "$out/crds/" && chmod 0644 "$out"/crds/*.yaml
	fi
fi
if want argo-rollouts; then
	out="$DIR/argo-rollouts-$ARGO_ROLLOUTS_VERSION"
	(cd "$HERE/tools/argo-rollouts" &&
		build "$out" rollouts-controller github.com/argoproj/argo-rollouts/cmd/rollouts-controller)
	if [ ! -d "$out/crds" ]; then
		# Rollout, AnalysisTemplate, ClusterAnalysisTemplate, AnalysisRun, Experiment.
		mod=$(cd "$HERE/tools/argo-rollouts" && go list -m -f '{{.Dir}}' github.com/argoproj/argo-rollouts)
		mkdir -p "$out/crds.tmp" && cp "$mod"/manifests/crds/*-crd.yaml "$out/crds.tmp/" &&
			chmod 0644 "$out"/crds.tmp/*.yaml && mv "$out/crds.tmp" "$out/crds"
	fi
	if [ ! -d "$out/traefik-crds" ]; then
		# Its Traefik router writes a TraefikService (traefik.io/v1alpha1): Traefik's CRDs, as
		# hack/traefik.sh keeps them beside its binary.
		crds="$(dirname "$("$HERE/traefik.sh" | tail -n1)")/crds"
		mkdir -p "$out/traefik-crds.tmp" && cp "$crds"/*.yaml "$out/traefik-crds.tmp/" &&
			mv "$out/traefik-crds.tmp" "$out/traefik-crds"
	fi
fi
echo "$DIR"
