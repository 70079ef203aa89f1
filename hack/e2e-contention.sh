#!/usr/bin/env bash
# Runs `make e2e` RUNS times in a row (3 by default) while a competing Go build of the whole
# module, from an empty build cache each time, keeps both cores busy: the stories must hold when
# CI's machine is shared. Stops at the first red run; prints each run's time and verdict.
#   hack/e2e-contention.sh            # or: RUNS=5 hack/e2e-contention.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
scratch=$(mktemp -d)
set -m
(
	while true; do
		rm -rf "$scratch/cache" && mkdir -p "$scratch/cache"
		GOCACHE="$scratch/cache" go build -a -o /dev/null ./... >/dev/null 2>&1 || true
		echo "competitor: one cold build of the module done" >&2
	done
) &
competitor=$!
set +m
trap 'kill -- -"$competitor" 2>/dev/null || true; rm -rf "$scratch"' EXIT
for i in $(seq "$runs"); do
	start=$(date +%s)
	if make e2e >"$scratch/e2e-$i.log" 2>&1; then verdict=green; else verdict=red; fi
	echo "e2e run $i/$runs under contention: $verdict in $(( $(date +%s) - start )) s"
	tail -n 15 "$scratch/e2e-$i.log"
	if [ "$verdict" = red ]; then
		cp "$scratch/e2e-$i.log" ./e2e-contention-failed.log
		echo "log kept in ./e2e-contention-failed.log" >&2
		exit 1
	fi
done
echo "all $runs e2e runs green under contention"
