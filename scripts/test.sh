#!/usr/bin/env bash
# The project's test command (`make test`): installs the system packages the
# integration tests need when it can (root with apt-get), then vets and runs
# every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/inn2.sh ]; then
	# Installs and starts INN2 on loopback when possible; prints the address
	# for the NNTP integration tests, or nothing (they then skip, saying why).
	if addr=$(bash scripts/inn2.sh start); then
		export SWITCHYARD_INN2_ADDR="$addr"
	elif [ "${CI:-}" = true ]; then
		# Locally the INN2 test skips and says why; CI must run it.
		echo "test.sh: INN2 could not be started, and CI runs the INN2 integration test" >&2
		exit 1
	fi
fi

if [ -x scripts/nzbget.sh ]; then
	# The NZBGet round-trip tests skip locally without nzbget (saying why);
	# CI must run them.
	if ! bash scripts/nzbget.sh install >/dev/null && [ "${CI:-}" = true ]; then
		echo "test.sh: nzbget could not be installed, and CI runs the NZBGet round-trip tests" >&2
		exit 1
	fi
fi

if [ -x scripts/chromium.sh ]; then
	# The dashboard's browser tests skip locally without Chromium (saying
	# why); CI must run them.
	if ! bash scripts/chromium.sh install >/dev/null && [ "${CI:-}" = true ]; then
		echo "test.sh: chromium could not be installed, and CI runs the browser tests" >&2
		exit 1
	fi
fi

go vet ./...

# Layering: a program that only uses the persist client links no SQLite, and
# the pure packages link no NATS server.
forbid() { # package, pattern
	if go list -deps "$1" | grep -E "$2"; then
		echo "test.sh: $1 must not depend on the packages above" >&2
		exit 1
	fi
}
forbid ./persist 'sqlite|nats-server'
forbid ./placement 'nats-server|sqlite'
forbid ./forward 'nats-server|sqlite'
forbid ./bus 'nats-server'
forbid ./work 'nats-server|sqlite'
# Metrics: the parts expose stats and hooks; only web/metrics imports
# Prometheus.
for p in ./persist ./persist/server ./placement ./forward ./nntp ./work ./usenet; do
	forbid "$p" 'prometheus'
done
go test -race -count=1 -timeout 20m ./...
