#!/usr/bin/env bash
# Measures skillfs against the native filesystem in the same run and prints
# the ratios: reads through a live session mount vs the same files read
# straight from the content store, and the time to import a ~20-skill,
# ~10 MB git repository. Run as root (the benchmarks mount FUSE).
# BENCHTIME (default 2s) and COUNT (default 3) tune the run.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime=${BENCHTIME:-2s}
count=${COUNT:-3}
out=$(mktemp)
go test -run '^$' -bench 'BenchmarkRead$' -benchtime "$benchtime" -count "$count" ./integration/ | tee "$out"
go test -run '^$' -bench 'BenchmarkImportRepo$' -benchtime 5x -count 1 ./integration/ | tee -a "$out"
echo
echo "median ns/op; ratio = through the mount / native"
awk '
/^BenchmarkRead\// {
	split($1, p, "/"); sub(/-[0-9]+$/, "", p[3])
	key = p[2]; side = p[3]
	v[key, side] = v[key, side] " " $3; keys[key] = 1
}
/^BenchmarkImportRepo/ { imp = imp " " $3 }
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return a[int((n + 1) / 2)]
}
END {
	printf "%-28s %14s %14s %8s\n", "case", "mount", "native", "ratio"
	for (k in keys) {
		m = median(v[k, "mount"]); n = median(v[k, "native"])
		if (n > 0) printf "%-28s %14d %14d %7.2fx\n", k, m, n, m / n
	}
	if (imp != "") printf "%-28s %14d ns (%.2f s)\n", "import 21 skills, 10 MB", median(imp), median(imp) / 1e9
}' "$out"
rm -f "$out"
