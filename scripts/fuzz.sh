#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each: a count of inputs
# ("20000x", the default) or a duration ("1m"). CI uses counts: with Go 1.26 a
# duration can end in a spurious "context deadline exceeded" failure on a
# loaded machine (golang/go#75804, fixed in Go 1.27).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${FUZZTIME:-20000x}
for pkg in $(go list ./...); do
	for f in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $f"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg"
	done
done
