#!/usr/bin/env bash
# Runs every test of skillfs: unit, FUSE, integration (the real binary, real
# mounts, a bwrap sandbox) and a short run of every fuzz target.
# Installs what the tests need when run as root on a Debian-like system.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
need_toolchain install

need=()
command -v git >/dev/null || need+=(git)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v unzip >/dev/null || need+=(unzip)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v sqlite3 >/dev/null || need+=(sqlite3)
# The Python client's tests, on the host and inside sandboxes, which see
# only /usr: the system's python3, and curl beside it.
[ -x /usr/bin/python3 ] || need+=(python3)
[ -x /usr/bin/curl ] || need+=(curl)
# The index tests run on PostgreSQL too: a throwaway server of the newest
# version installed (index/pgtest), which under CI=true they require.
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

# Every temporary folder of the tests — and so every mount they make, the
# daemons' included — is under a folder of this run's own: a mount left
# under it afterwards is one the tests left behind. Other mounts on the
# machine are none of the tests' business (each package that mounts also
# fails by itself when its tests leave a mount: fusetest.Main).
tmp_before=${TMPDIR:-/tmp}
TMPDIR=$(mktemp -d "$tmp_before/skillfs-test.XXXXXX")
chmod 1777 "$TMPDIR" # as /tmp: the tests' PostgreSQL runs as an unprivileged user
export TMPDIR
left_behind() { awk -v dir="$TMPDIR/" 'index($2, dir) == 1 { print $2 " (" $3 ")" }' /proc/self/mounts; }
finish() {
	local left
	left=$(left_behind)
	if [ -n "$left" ]; then
		echo "tests left mounts behind:" >&2
		echo "$left" >&2
		return 1
	fi
	rm -rf --one-file-system "$TMPDIR"
}
trap 'finish || exit 1' EXIT

go test -count=1 -timeout 20m ./...
# The integration suite once more with every data directory on a PostgreSQL
# database of its own (a shared index, each home a fleet of one host).
SKILLFS_TEST_INDEX=postgres go test -count=1 -timeout 20m ./integration
finish
trap - EXIT
export TMPDIR=$tmp_before
FUZZTIME=${FUZZTIME:-6s} scripts/fuzz.sh
