#!/usr/bin/env bash
# Installs the Debian packages an integration test needs, when its commands
# are missing (the tests that use them skip locally without them, saying
# why; CI must run them):
#
#   bash scripts/apt-install.sh NAME 'COMMAND...' 'PACKAGE...'
#
# e.g. `apt-install.sh nzbget 'nzbget par2' 'nzbget par2'`. When every
# COMMAND is on PATH it does nothing; otherwise it installs PACKAGE... with
# apt-get (root only), then checks again. It prints the first command's path.
# On failure it exits non-zero and says why on stderr; it never prompts, and
# every slow step runs under a timeout so CI cannot hang on it. apt-get's
# output goes to a log, never to our stdout or stderr.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: apt-install.sh NAME 'COMMAND...' 'PACKAGE...'" >&2; exit 2; }
NAME=$1
read -r -a COMMANDS <<<"$2"
PACKAGES=$3
LOG=${TMPDIR:-/tmp}/switchyard-$NAME.log

say() { echo "apt-install.sh ($NAME): $*" >&2; }
die() {
	say "$*"
	[ -s "$LOG" ] && { say "last lines of $LOG:"; tail -n 15 "$LOG" >&2; }
	exit 1
}

# quiet runs a command with its output in the log and no terminal input.
quiet() { "$@" </dev/null >>"$LOG" 2>&1; }

installed() {
	local c
	for c in "${COMMANDS[@]}"; do
		command -v "$c" >/dev/null || return 1
	done
}

if ! installed; then
	[ "$(id -u)" -eq 0 ] || die "$PACKAGES not installed, and installing needs root"
	command -v apt-get >/dev/null || die "$PACKAGES not installed, and apt-get is not available"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086 # PACKAGES is a word list
	apt=(timeout 900 apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold $PACKAGES)
	say "installing $PACKAGES (log: $LOG)"
	if ! quiet "${apt[@]}"; then
		# A clean CI image has no package lists yet.
		quiet timeout 300 apt-get update -q || die "apt-get update failed"
		quiet "${apt[@]}" || die "installing $PACKAGES failed"
	fi
	installed || die "$PACKAGES installed, but one of ${COMMANDS[*]} is not on PATH"
fi
command -v "${COMMANDS[0]}"
