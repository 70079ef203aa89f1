#!/usr/bin/env bash
# Builds Traefik, a real Gateway API implementation (its kubernetesgateway provider), from the
# Go module proxy once, into a cache outside the checkout keyed by version, like
# hack/controlplane.sh. It is the data path of the local environment (issue #26): requests go
# through a real Gateway to the pods' addresses. hack/tools/traefik is the wrapper module (it
# carries the replace and exclude lines of Traefik's own go.mod).
#
# Usage: hack/traefik.sh   Prints the binary's path on its last line of stdout (Traefik's CRDs
# are in crds/ beside it), and nothing else there: progress goes to stderr. A first run takes about 6 minutes on 2 quiet cores once its
# 764 modules are downloaded (a minute or two more to download them); 11 minutes were measured
# with a CI run sharing the machine. MODELSHIP_CACHE moves the cache.
set -euo pipefail

TRAEFIK_VERSION=v3.6.12
CACHE=${MODELSHIP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelship}
DIR="$CACHE/gateway/traefik-${TRAEFIK_VERSION}"
HERE=$(cd "$(dirname "$0")" && pwd)
PKG=github.com/traefik/traefik/v3/cmd/traefik
BIN="$DIR/traefik"

log() { printf '[gateway %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ ! -x "$BIN" ]; then
	mkdir -p "$DIR"
	log "first run: building Traefik ${TRAEFIK_VERSION} from the Go module proxy into $DIR (about 6 minutes on 2 quiet cores, more on a busy machine, plus the download of its modules; cached for later runs and fresh clones); progress follows"
	start=$(date +%s)
	log "resolving the packages of traefik (downloads its modules on a first run)"
	total=$(cd "$HERE/tools/traefik" && go list -deps "$PKG" | wc -l)
	log "building traefik from $PKG ($total packages; builds run at nice 10)"
	ldflags="-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=${TRAEFIK_VERSION}"
	(cd "$HERE/tools/traefik" && nice -n 10 go build -v -trimpath -ldflags "$ldflags" -o "$BIN.tmp" "$PKG" 2>&1) |
		awk -v total="$total" -v start="$start" '
			/^#|\.go:[0-9]+:|^go: / { print > "/dev/stderr" }
			{ n++; pct = int(100 * n / (total > 0 ? total : 1)); if (pct >= last + 5) { last = pct;
			  printf "[gateway] traefik: %d/%d packages compiled (%d%%), %ds elapsed\n", n, total, pct, systime() - start > "/dev/stderr"; fflush("/dev/stderr") } }'
	[ "${PIPESTATUS[0]}" -eq 0 ] || { log "build of traefik failed"; rm -f "$BIN.tmp"; exit 1; }
	mv "$BIN.tmp" "$BIN"
	log "built traefik in $(( $(date +%s) - start ))s ($(du -m "$BIN" | cut -f1) MiB)"
fi
if [ ! -f "$DIR/crds/traefik-crds.yaml" ]; then
	# Traefik's own CRDs (traefik.io/v1alpha1), for its kubernetescrd provider: TraefikServices
	# (the shadow phase's mirror, Argo Rollouts' Traefik router). The provider lists every
	# traefik.io kind before it serves, so all of them go in.
	mod=$(cd "$HERE/tools/traefik" && go mod download -json github.com/traefik/traefik/v3 | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	mkdir -p "$DIR/crds.tmp" &&
		cp "$mod/docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml" "$DIR/crds.tmp/traefik-crds.yaml" &&
		chmod 0644 "$DIR"/crds.tmp/*.yaml && rm -rf "$DIR/crds" && mv "$DIR/crds.tmp" "$DIR/crds"
fi
echo "$BIN"
