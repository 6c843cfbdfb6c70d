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

# The NZBGet round trip (nzbget, and par2 for real recovery files, which
# usenet/par2's tests also make), the RAR readers and the browser tests
# (Chromium) skip locally without their programs, saying why; CI must run
# them.
need() { # name, commands, packages
	if ! bash scripts/apt-install.sh "$1" "$2" "$3" >/dev/null && [ "${CI:-}" = true ]; then
		echo "test.sh: $1 could not be installed, and CI runs the tests that need it" >&2
		exit 1
	fi
}
need nzbget 'nzbget par2' 'nzbget par2'
# RAR readers check the archives usenet/rar/rartest writes (Debian's 7zip is
# built without RAR support, so libarchive's bsdtar and unar's lsar).
need rar-readers 'bsdtar lsar' 'libarchive-tools unar'
need chromium 'chromium' 'chromium'

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
forbid ./events 'nats-server|sqlite'
# Metrics: the parts expose stats and hooks; only web/metrics imports
# Prometheus.
for p in ./persist ./persist/server ./placement ./forward ./nntp ./work ./usenet ./events; do
	forbid "$p" 'prometheus'
done
# Roles are composed in one place: only the binary, the benchmarks, the
# system tests and the test helpers import fleet; the lifecycle contract
# imports nothing of ours, so every package can use it.
mod=$(go list -m)
importers=$(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | awk -v f="$mod/fleet" '{for (i = 2; i <= NF; i++) if ($i == f) print $1}')
for p in $importers; do
	case "${p#"$mod"/}" in
	cmd/switchyard | bench | e2e | internal/test*) ;;
	*)
		echo "test.sh: $p imports fleet: only cmd/switchyard, bench, e2e and internal/test* may" >&2
		exit 1
		;;
	esac
done
if go list -f '{{join .Imports "\n"}}' ./internal/lifecycle | grep -F "$mod/"; then
	echo "test.sh: internal/lifecycle must not import the module's packages" >&2
	exit 1
fi
# e2e (the system tests, the longest package) is named first so that it
# starts first: go test runs the packages in the order given, two at a time
# on a 2-core machine, and the rest fit beside it.
go test -race -count=1 -timeout 20m ./e2e $(go list ./... | grep -v '/e2e$')
