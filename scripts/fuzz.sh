#!/usr/bin/env bash
# Runs every fuzz target of the project for a bounded time each
# (FUZZTIME, default 30s). New crashers land in the package's testdata/fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
need_toolchain
time=${FUZZTIME:-30s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz $pkg $target ($time)"
		for attempt in 1 2; do
			if out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" -fuzzminimizetime=5s "$pkg" 2>&1); then
				break
			fi
			# The fuzzing engine reports "context deadline exceeded" when
			# -fuzztime runs out while it minimizes a new interesting (not
			# failing) input; that found nothing, so the target runs again.
			# A real failure writes its input to testdata/fuzz and fails.
			if [ "$attempt" = 1 ] && ! grep -q 'Failing input written' <<<"$out" &&
				grep -q 'context deadline exceeded' <<<"$out"; then
				echo "fuzz $pkg $target: the time ran out while minimizing an interesting input; running it again"
				continue
			fi
			printf '%s\n' "$out" >&2
			exit 1
		done
	done
done
echo "fuzz: all targets ran clean"
