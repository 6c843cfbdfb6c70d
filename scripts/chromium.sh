#!/usr/bin/env bash
# Installs the browser the dashboard's browser tests drive headless:
# Chromium (Debian package chromium).
#
#   bash scripts/chromium.sh install   install it when missing (root + apt-get);
#                                      idempotent, prints chromium's path
#
# On failure it exits non-zero and says why on stderr; it never prompts, and
# every slow step runs under a timeout so CI cannot hang on it.
set -euo pipefail

PACKAGES="chromium"

# Output of apt-get goes to this log, never to our stdout or stderr.
LOG=${TMPDIR:-/tmp}/switchyard-chromium.log

say() { echo "chromium.sh: $*" >&2; }
die() {
	say "$*"
	[ -s "$LOG" ] && { say "last lines of $LOG:"; tail -n 15 "$LOG" >&2; }
	exit 1
}

# quiet runs a command with its output in the log and no terminal input.
quiet() { "$@" </dev/null >>"$LOG" 2>&1; }

installed() { command -v chromium >/dev/null; }

install() {
	if installed; then
		command -v chromium
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "$PACKAGES not installed and installing it needs root"
	command -v apt-get >/dev/null || die "$PACKAGES not installed and apt-get is not available"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086 # PACKAGES is a word list
	local apt=(timeout 900 apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold $PACKAGES)
	say "installing $PACKAGES (log: $LOG)"
	if ! quiet "${apt[@]}"; then
		# A clean CI image has no package lists yet.
		quiet timeout 300 apt-get update -q || die "apt-get update failed"
		quiet "${apt[@]}" || die "installing $PACKAGES failed"
	fi
	installed || die "$PACKAGES installed but chromium is not on PATH"
	command -v chromium
}

case ${1:-} in
install) install ;;
*)
	say "usage: chromium.sh install"
	exit 2
	;;
esac
