#!/usr/bin/env bash
# make down: stops the local cluster of make up (test/up/up.sh) in UP_DIR,
# by the process ids it recorded, then removes UP_DIR. It signals only
# processes that run from that folder or keep their files in it.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${UP_DIR:-${root}/bin/up}"

ours() { [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "${dir}/"; }
gone() {
	local p
	for p in "$@"; do
		if ours "$p"; then return 1; fi
	done
}

if [[ ! -f "${dir}/up.pid" ]]; then
	echo "down: nothing is up in ${dir}"
	rm -rf "${dir}"
	exit 0
fi
up="$(cat "${dir}/up.pid")"
pids="$(cat "${dir}/pids" 2>/dev/null || true)"
if ours "${up}"; then
	# What it started, recorded or not yet (a start cut short).
	for status in /proc/[0-9]*/status; do
		if grep -q "^PPid:[[:space:]]*${up}\$" "${status}" 2>/dev/null; then
			p="${status#/proc/}"
			pids="${pids} ${p%/status}"
		fi
	done
	kill -TERM "${up}"
	# It stops the manager, then each process (SIGKILL after 10 s each).
	for _ in $(seq 1200); do
		gone "${up}" && break
		sleep 0.1
	done
	if ! gone "${up}"; then
		echo "down: the cluster did not stop in 2 minutes; killing it" >&2
		kill -KILL "${up}" 2>/dev/null || true
	fi
fi
# What a killed up left behind.
for p in ${pids}; do
	if ours "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
done
for _ in $(seq 100); do
	# shellcheck disable=SC2086
	gone ${pids} && break
	sleep 0.1
done
rm -rf "${dir}"
echo "down: the local cluster is stopped"
