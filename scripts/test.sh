#!/usr/bin/env bash
# Runs every test of skillfs: unit, FUSE, integration (the real binary, real
# mounts, a bwrap sandbox) and a short run of every fuzz target.
# Installs what the tests need when run as root on a Debian-like system.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v git >/dev/null || need+=(git)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v unzip >/dev/null || need+=(unzip)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v sqlite3 >/dev/null || need+=(sqlite3)
# The index tests run on PostgreSQL too: a throwaway server of the newest
# version installed (internal/pgtest), which under CI=true they require.
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || command -v postgres >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing ${need[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "missing ${need[*]}: install them (Debian: apt-get install ${need[*]})" >&2
		[ "${CI:-}" = true ] && exit 1
	fi
fi

unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
# Mounts left behind by a test are a failure too.
before=$(grep -c ' fuse' /proc/mounts || true)
go test -count=1 -timeout 20m ./...
# The integration suite once more with every data directory on a PostgreSQL
# database of its own (a shared index, each home a fleet of one host).
SKILLFS_TEST_INDEX=postgres go test -count=1 -timeout 20m ./integration
after=$(grep -c ' fuse' /proc/mounts || true)
if [ "$after" -gt "$before" ]; then
	echo "tests left FUSE mounts behind:" >&2
	grep ' fuse' /proc/mounts >&2
	exit 1
fi
FUZZTIME=${FUZZTIME:-10s} scripts/fuzz.sh
