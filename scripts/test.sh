#!/usr/bin/env bash
# Runs every test of skillfs: unit, FUSE, integration (the real binary, real
# mounts, a bwrap sandbox) and a short run of every fuzz target.
# Installs what the tests need when run as root on a Debian-like system.
# The three long phases — go test over every package, the integration suite
# on PostgreSQL, the fuzz targets — run at the same time (they wait on
# daemons, sockets and mounts more than they compute), each line of their
# output prefixed with the phase's name; a table of every phase's wall time
# ends the run, and a phase that failed has its whole output repeated under it.
set -euo pipefail
cd "$(dirname "$0")/.."

# Phases: each one's start and end (seconds since the run began) and exit
# status, for the table at the end.
began=$(date +%s)
order=()
declare -A from to status pids
clock() { echo $(($(date +%s) - began)); }
phase() { order+=("$1"); from[$1]=$(clock); }
phase_end() { to[$1]=$(clock); status[$1]=$2; }
table() {
	local name
	echo "== phases (wall seconds: start, end, duration)"
	for name in "${order[@]}"; do
		printf '%-8s %5s %5s %5s  %s\n' "$name" "${from[$name]}" "${to[$name]:-}" \
			"$((${to[$name]:-$(clock)} - ${from[$name]}))" "${status[$name]:-did not end}"
	done
	printf '%-8s %5s %5s %5s\n' total 0 "$(clock)" "$(clock)"
	# The processor time of everything the run started and waited for:
	# near twice the wall time on two processors means the run is bound by
	# computing, far below it that its phases mostly wait.
	# (times, not in a pipe: a pipe's subshell has no children of its own.)
	echo "processor time (user, system) of this script, then of all it ran:"
	times
}
trap table EXIT

phase setup
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
phase_end setup ok


phase gofmt
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:" >&2
	echo "$unformatted" >&2
	phase_end gofmt FAILED
	exit 1
fi
phase_end gofmt ok
# go vet compiles every package's dependencies; go test below reuses them
# from the build cache, and runs no vet of its own (-vet=off: it would
# only run a subset of the checks go vet ran here).
phase vet
go vet ./... || {
	phase_end vet FAILED
	exit 1
}
phase_end vet ok

# Every temporary folder of the tests — and so every mount they make, the
# daemons' included — is under a folder of this run's own: a mount left
# under it afterwards is one the tests left behind. Other mounts on the
# machine are none of the tests' business (each package that mounts also
# fails by itself when its tests leave a mount: fusetest.Main). Each phase
# has a folder of its own in it, and the phases' logs are kept beside.
root=$(mktemp -d "${TMPDIR:-/tmp}/skillfs-test.XXXXXX")
chmod 1777 "$root" # as /tmp: the tests' PostgreSQL runs as an unprivileged user
mkdir "$root/logs"
left_behind() { awk -v dir="$root/" 'index($2, dir) == 1 { print $2 " (" $3 ")" }' /proc/self/mounts; }

# start NAME COMMAND...: runs a phase in the background, with TMPDIR a
# folder of its own, its output kept in logs/NAME and shown as it comes,
# each line prefixed "NAME| ". Each phase is a process group of its own
# (set -m while they start), stopped whole when the run is interrupted.
set -m
start() {
	local name=$1
	shift
	mkdir "$root/$name"
	chmod 1777 "$root/$name"
	phase "$name"
	(
		set +e
		TMPDIR=$root/$name "$@" 2>&1 | tee "$root/logs/$name" | sed -u "s/^/$name| /"
		echo "${PIPESTATUS[0]}" >"$root/logs/$name.status"
		date +%s >"$root/logs/$name.end"
	) &
	pids[$name]=$!
}
stop() {
	local name left
	for name in "${!pids[@]}"; do kill -TERM -- "-${pids[$name]}" 2>/dev/null || true; done
	wait
	left=$(left_behind)
	if [ -n "$left" ]; then
		echo "interrupted; mounts left behind:" >&2
		echo "$left" >&2
	else
		rm -rf --one-file-system "$root"
	fi
}
trap 'stop; exit 130' INT TERM

start test go test -vet=off -count=1 -timeout 20m ./...
# The integration suite once more with every data directory on a PostgreSQL
# database of its own (a shared index, each home a fleet of one host).
start pg env SKILLFS_TEST_INDEX=postgres go test -vet=off -count=1 -timeout 20m ./integration
start fuzz env FUZZTIME="${FUZZTIME:-6s}" FUZZJOBS="${FUZZJOBS:-2}" scripts/fuzz.sh
set +m # the groups are made; no job notices in the output

failed=()
for name in test pg fuzz; do
	wait "${pids[$name]}" || true
	unset "pids[$name]"
	code=$(cat "$root/logs/$name.status" 2>/dev/null || echo "?")
	to[$name]=$(($(cat "$root/logs/$name.end" 2>/dev/null || date +%s) - began))
	if [ "$code" = 0 ]; then
		status[$name]=ok
	else
		status[$name]="FAILED (exit $code)"
		failed+=("$name")
	fi
done
left=$(left_behind)
for name in "${failed[@]}"; do
	echo "== $name failed; its whole output:" >&2
	cat "$root/logs/$name" >&2
done
if [ -n "$left" ]; then
	echo "tests left mounts behind:" >&2
	echo "$left" >&2
	exit 1
fi
rm -rf --one-file-system "$root"
[ ${#failed[@]} = 0 ] || exit 1
