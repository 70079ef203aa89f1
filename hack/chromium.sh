#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the dashboard's browser tests
# (test/dashboard drives internal/dashboard in it with the DevTools protocol) and prints its path on the last line
# of stdout.
#
# Usage: hack/chromium.sh
set -euo pipefail

log() { printf '[chromium %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

find_chromium() {
	for c in chromium chromium-browser google-chrome-stable google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if ! find_chromium >/dev/null; then
	if ! command -v apt-get >/dev/null 2>&1; then
		log "chromium is not installed and apt-get is missing: install Chromium or Chrome and put it in PATH"
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	log "installing Debian's chromium package (~1-2 min, about 300 MB with its libraries)"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq >&2 || log "apt-get update failed; trying the install anyway"
	$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi
path=$(find_chromium)
log "$("$path" --version 2>/dev/null | head -n1)"
echo "$path"
