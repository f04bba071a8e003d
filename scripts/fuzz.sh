#!/usr/bin/env bash
# Runs every fuzz target of the project for a bounded time each
# (FUZZTIME, default 30s). New crashers land in the package's testdata/fuzz/.
# FUZZJOBS (default 1) targets run at the same time, each with its share of
# the machine's processors as fuzzing workers (at least one).
#
# Each package's fuzzing test binary is built once (go test -c -fuzz: the
# package and all it imports compiled with coverage instrumentation), and
# each of its targets runs from that binary in the package's folder, with
# the fuzzing cache go test -fuzz uses: the same as go test -fuzz=TARGET,
# without a link per target.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
need_toolchain
time=${FUZZTIME:-30s}
jobs=${FUZZJOBS:-1}
workers=$(($(nproc) / jobs))
[ "$workers" -ge 1 ] || workers=1
cache=$(go env GOCACHE)/fuzz
bin=$(mktemp -d "${TMPDIR:-/tmp}/skillfs-fuzz.XXXXXX")
trap 'rm -rf "$bin"' EXIT

# fuzz PKG DIR TARGET EXE: one target of PKG (in DIR) for $time, run from EXE;
# prints one line, or on failure the whole output, and marks the run failed.
fuzz() {
	local pkg=$1 dir=$2 target=$3 exe=$4 out=$bin/${1//\//_}.$3.out attempt rc began
	began=$(date +%s)
	for attempt in 1 2; do
		rc=0
		(cd "$dir" && "$exe" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$time" \
			-test.fuzzminimizetime=5s -test.fuzzcachedir="$cache/$pkg" -test.parallel="$workers" \
			-test.timeout=10m -test.paniconexit0) >"$out" 2>&1 || rc=$?
		[ "$rc" = 0 ] && break
		# The fuzzing engine reports "context deadline exceeded" when
		# -fuzztime runs out while it minimizes a new interesting (not
		# failing) input; that found nothing, so the target runs again.
		# A real failure writes its input to testdata/fuzz and fails.
		if [ "$attempt" = 1 ] && ! grep -q 'Failing input written' "$out" &&
			grep -q 'context deadline exceeded' "$out"; then
			echo "fuzz $pkg $target: the time ran out while minimizing an interesting input; running it again"
			continue
		fi
		break
	done
	if [ "$rc" = 0 ]; then
		echo "fuzz $pkg $target ($time): ok in $(($(date +%s) - began))s"
	else
		{
			echo "fuzz $pkg $target ($time): FAILED"
			cat "$out"
		} >&2
		touch "$bin/failed"
	fi
	rm -f "$out"
}

running=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u) || true
	[ -n "$targets" ] || continue
	# Built one package after another (two builds at once would compile
	# the instrumented standard library twice), while targets of packages
	# built before run.
	exe=$bin/${pkg//\//_}.test
	if ! go test -c -vet=off -fuzz=. -o "$exe" "$pkg"; then
		echo "fuzz $pkg: the fuzzing test binary does not build" >&2
		touch "$bin/failed"
		continue
	fi
	for target in $targets; do
		if [ "$running" -ge "$jobs" ]; then
			wait -n || true
			running=$((running - 1))
		fi
		fuzz "$pkg" "$dir" "$target" "$exe" &
		running=$((running + 1))
	done
done
wait
if [ -e "$bin/failed" ]; then
	echo "fuzz: some targets failed (their output is above)" >&2
	exit 1
fi
echo "fuzz: all targets ran clean"
