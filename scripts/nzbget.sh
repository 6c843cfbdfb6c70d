#!/usr/bin/env bash
# Installs the downloader the round-trip tests run: NZBGet (Debian package
# nzbget) and par2 (package par2, for real recovery files).
#
#   bash scripts/nzbget.sh install   install what is missing (root + apt-get);
#                                    idempotent, prints nzbget's path
#
# On failure it exits non-zero and says why on stderr; it never prompts, and
# every slow step runs under a timeout so CI cannot hang on it.
set -euo pipefail

PACKAGES="nzbget par2"

# Output of apt-get goes to this log, never to our stdout or stderr.
LOG=${TMPDIR:-/tmp}/switchyard-nzbget.log

say() { echo "nzbget.sh: $*" >&2; }
die() {
	say "$*"
	[ -s "$LOG" ] && { say "last lines of $LOG:"; tail -n 15 "$LOG" >&2; }
	exit 1
}

# quiet runs a command with its output in the log and no terminal input.
quiet() { "$@" </dev/null >>"$LOG" 2>&1; }

installed() { command -v nzbget >/dev/null && command -v par2 >/dev/null; }

install() {
	if installed; then
		command -v nzbget
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "$PACKAGES not installed and installing them needs root"
	command -v apt-get >/dev/null || die "$PACKAGES not installed and apt-get is not available"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086 # PACKAGES is a word list
	local apt=(timeout 900 apt-get install -y -q -o Dpkg::Options::=--force-confold $PACKAGES)
	say "installing $PACKAGES (log: $LOG)"
	if ! quiet "${apt[@]}"; then
		# A clean CI image has no package lists yet.
		quiet timeout 300 apt-get update -q || die "apt-get update failed"
		quiet "${apt[@]}" || die "installing $PACKAGES failed"
	fi
	installed || die "$PACKAGES installed but nzbget or par2 is not on PATH"
	command -v nzbget
}

case ${1:-} in
install) install ;;
*)
	say "usage: nzbget.sh install"
	exit 2
	;;
esac
