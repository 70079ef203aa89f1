#!/usr/bin/env bash
# Makes sure a Prometheus server is installed for the local dev environment and the e2e tests
# (test/framework/devenv runs it on 127.0.0.1 with its own configuration; the Debian service is not
# used) and prints its path on the last line of stdout.
#
# Usage: hack/prometheus.sh
set -euo pipefail

log() { printf '[prometheus %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if ! command -v prometheus >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		log "prometheus is not installed and apt-get is missing: install Prometheus >= 2.42 and put it in PATH"
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	log "installing Debian's prometheus package (~20 s)"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq >&2 || log "apt-get update failed; trying the install anyway"
	$sudo apt-get install -y -qq --no-install-recommends prometheus >&2
	# The package's service is not wanted: devenv runs its own Prometheus.
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
		$sudo systemctl disable --now prometheus >&2 || true
	fi
fi
path=$(command -v prometheus)
log "$("$path" --version 2>&1 | head -n1)"
echo "$path"
