#!/usr/bin/env bash
# Runs the Debian INN2 news server on loopback for the NNTP integration tests.
#
#   bash scripts/inn2.sh start          install when missing (root + apt-get), start,
#                                       print host:port on stdout; idempotent
#   bash scripts/inn2.sh newgroup NAME  create a newsgroup (y = posting allowed)
#   bash scripts/inn2.sh stop           stop the server
#
# On failure it exits non-zero and says why on stderr; it never prompts, and
# every slow step runs under a timeout so CI cannot hang on it.
set -euo pipefail

HOST=127.0.0.1
PORT=119
NEWS_BIN=/usr/lib/news/bin
INN_CONF=/etc/news/inn.conf
# Groups the integration test can always post to, even when it cannot create
# its own (for example when it runs as a user that may not call ctlinnd).
DEFAULT_GROUPS="switchyard.test.a switchyard.test.b switchyard.test.c"

# Output of apt-get, dpkg and rc.news goes to this log, never to our stdout
# or stderr: daemons they start would inherit those descriptors and keep a
# CI log pipe open after the tests end.
LOG=${TMPDIR:-/tmp}/switchyard-inn2.log

say() { echo "inn2.sh: $*" >&2; }
die() {
	say "$*"
	[ -s "$LOG" ] && { say "last lines of $LOG:"; tail -n 15 "$LOG" >&2; }
	exit 1
}

# quiet runs a command with its output in the log and no terminal input.
quiet() { "$@" </dev/null >>"$LOG" 2>&1; }

as_news() {
	if [ "$(id -u)" -eq 0 ]; then
		su news -s /bin/bash -c "$*"
	else
		bash -c "$*"
	fi
}

# greets succeeds when something on HOST:PORT answers with a 200/201 greeting.
greets() {
	timeout 5 bash -c "exec 3<>/dev/tcp/$HOST/$PORT && head -n1 <&3 | grep -q '^20[01]'" 2>/dev/null
}

installed() { [ -x "$NEWS_BIN/rc.news" ] && [ -x "$NEWS_BIN/ctlinnd" ]; }

# set_domain gives inn.conf a domain: without one the package's post-install
# step fails on hosts whose name does not resolve to a domain.
set_domain() {
	[ -f "$INN_CONF" ] || return 0
	if ! grep -Eq '^domain:[[:space:]]*[^[:space:]]' "$INN_CONF"; then
		if grep -Eq '^#?[[:space:]]*domain:' "$INN_CONF"; then
			sed -i -E 's/^#?[[:space:]]*domain:.*/domain: example.test/' "$INN_CONF"
		else
			echo 'domain: example.test' >>"$INN_CONF"
		fi
	fi
}

# set_conf KEY VALUE sets one inn.conf parameter (read at innd's start).
set_conf() {
	if grep -Eq "^#?[[:space:]]*$1:" "$INN_CONF"; then
		sed -i -E "s/^#?[[:space:]]*$1:.*/$1: $2/" "$INN_CONF"
	else
		echo "$1: $2" >>"$INN_CONF"
	fi
}

# tune_for_tests turns off INN's throttling by load average: a test run on a
# busy 2-core machine reaches a load of 15, where innwatch pauses innd
# ("403 loadav [innwatch:load] 1536 gt 1500") and nnrpd refuses readers
# above 16, failing every INN2 test with a message about the machine.
tune_for_tests() {
	[ -f "$INN_CONF" ] || return 0
	set_conf doinnwatch false
	set_conf nnrpdloadlimit 0
}

install_inn2() {
	[ "$(id -u)" -eq 0 ] || die "inn2 is not installed and installing it needs root"
	command -v apt-get >/dev/null || die "inn2 is not installed and apt-get is not available"
	export DEBIAN_FRONTEND=noninteractive
	local apt=(timeout 900 apt-get install -y -q -o Dpkg::Options::=--force-confold inn2)
	say "installing inn2 (log: $LOG)"
	if ! quiet "${apt[@]}"; then
		# Either the package lists are missing (clean CI image) or the
		# post-install step failed for want of a domain: fix both and retry.
		set_domain
		if ! dpkg -s inn2 >/dev/null 2>&1 || ! quiet timeout 300 dpkg --configure inn2; then
			quiet timeout 300 apt-get update -q || die "apt-get update failed"
			quiet "${apt[@]}" || { set_domain && quiet timeout 300 dpkg --configure inn2; } || die "installing inn2 failed"
		fi
	fi
	set_domain
	installed || die "inn2 installed but $NEWS_BIN/rc.news is missing"
}

start() {
	if greets; then
		# Started before, perhaps with innwatch: resume it if load paused
		# it (the next start runs without innwatch).
		tune_for_tests
		as_news "timeout 30 $NEWS_BIN/ctlinnd -s go ''" >/dev/null 2>&1 || true
		ensure_groups
		echo "$HOST:$PORT"
		return 0
	fi
	installed || install_inn2
	set_domain
	tune_for_tests
	say "starting innd"
	# rc.news backgrounds innd and returns.
	quiet as_news "timeout 60 $NEWS_BIN/rc.news start" || die "rc.news start failed"
	local i
	for i in $(seq 1 60); do
		if greets; then
			ensure_groups
			echo "$HOST:$PORT"
			return 0
		fi
		sleep 0.5
	done
	die "innd did not answer on $HOST:$PORT within 30s"
}

ensure_groups() {
	local g
	for g in $DEFAULT_GROUPS; do
		grep -q "^$g " /var/lib/news/active 2>/dev/null && continue
		newgroup "$g" >/dev/null
	done
}

newgroup() {
	local name=${1:?usage: inn2.sh newgroup NAME}
	[[ $name =~ ^[a-z0-9][a-z0-9.+_-]*$ ]] || die "bad group name: $name"
	as_news "timeout 30 $NEWS_BIN/ctlinnd -s newgroup '$name' y" || die "ctlinnd newgroup $name failed"
}

stop() {
	installed || return 0
	quiet as_news "timeout 60 $NEWS_BIN/rc.news stop" || true
}

case ${1:-} in
start) start ;;
newgroup) newgroup "${2:-}" ;;
stop) stop ;;
*)
	say "usage: inn2.sh start | newgroup NAME | stop"
	exit 2
	;;
esac
