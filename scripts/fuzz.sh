#!/usr/bin/env bash
# Runs every fuzz target of the project for a bounded time each
# (FUZZTIME, default 30s). New crashers land in the package's testdata/fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${FUZZTIME:-30s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz $pkg $target ($time)"
		if ! out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" -fuzzminimizetime=5s "$pkg" 2>&1); then
			printf '%s\n' "$out" >&2
			exit 1
		fi
	done
done
echo "fuzz: all targets ran clean"
