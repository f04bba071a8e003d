#!/usr/bin/env bash
# Measures skillfs against a projection, what an operator would do instead:
# a `cp -a` copy of the same session's skill files in a plain folder. The
# read cases (fs/readbench) run in the same run on a session's mount
# served by the real daemon and on the projection, both warmed first; the
# FUSE requests every operation sends come from the same cases on a mount
# served in process (fs.BenchmarkRead), where the daemon's counters can be
# read. Then the import of a ~20-skill, ~10 MB git repository and of a
# 30-skill, ~20 MB repository on this machine at a ref, and the
# catalog-scale figures when BenchmarkCatalogScale exists. Run as root (the
# benchmarks mount FUSE); with the defaults about 3 minutes on a 2-core
# machine, and 1 more for the catalog-scale benchmark (10,000 skills).
#
# BENCHTIME (default 500ms) and COUNT (default 9) tune the read benchmarks;
# CATALOG_BENCHTIME (default 1x) the catalog-scale one.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime=${BENCHTIME:-500ms}
count=${COUNT:-9}
reads=$(mktemp) reqs=$(mktemp) imports=$(mktemp) catalog=$(mktemp)
trap 'rm -f "$reads" "$reqs" "$imports" "$catalog"' EXIT

go test -run '^$' -bench 'BenchmarkRead$' -benchtime "$benchtime" -count "$count" ./integration/ | tee "$reads"
go test -run '^$' -bench 'BenchmarkRead$' -benchtime 100x -count 1 ./fs/ | tee "$reqs"
go test -run '^$' -bench 'BenchmarkImport(Repo|LocalGit)$' -benchtime 5x -count 1 ./integration/ | tee "$imports"
if grep -q '^func BenchmarkCatalogScale' integration/*_test.go; then
	go test -run '^$' -bench 'BenchmarkCatalogScale' -benchtime "${CATALOG_BENCHTIME:-1x}" -count 1 ./integration/ | tee "$catalog"
fi

echo
echo "Medians of $count runs of $benchtime. ratio = native/mount: the median over the runs of the projection's time / the mount's time in the same run (1.00: as fast as native; higher is better for the mount). FUSE requests/op: sent by every operation on the mount."
echo
awk '
BEGIN {
	label["4KiB"] = "open+read+close 4 KiB"
	label["4KiB-4readers"] = "open+read+close 4 KiB, 4 readers"
	label["SKILL.md"] = "open+read+close SKILL.md (activated)"
	label["stat-tree"] = "stat every file of a 200-file skill"
	label["walk-read"] = "walk a 200-file skill, read every file"
	label["walk-stat"] = "walk a 200-file skill, stat every entry (ls -lR)"
	label["ls-l-34"] = "ls -l of a 34-entry folder"
	label["64MiB"] = "read 64 MiB"
	label["16MiB"] = "read 16 MiB"
	label["py-open-4KiB"] = "Python `open(p).read()` of 4 KiB (`isatty` asks: one `IOCTL`)"
	label["py-open-4KiB-unbuffered"] = "Python `open(p, \"rb\", buffering=0).read()` of 4 KiB"
	label["4KiB-cold"] = "open+read+close 4 KiB, cold"
	label["16MiB-cold"] = "read 16 MiB, cold"
}
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return a[int((n + 1) / 2)]
}
function cell(key,   ns, s) {
	ns = median(t[key])
	if (ns >= 1e9) s = sprintf("%.2f s", ns / 1e9)
	else if (ns >= 1e6) s = sprintf("%.2f ms", ns / 1e6)
	else if (ns >= 1e3) s = sprintf("%.1f µs", ns / 1e3)
	else s = sprintf("%.0f ns", ns)
	if (size[key] >= 1048576) s = s sprintf(" (%.1f GB/s)", size[key] / ns)
	return s
}
# BenchmarkRead/<case>/<side>-<procs> <N> <ns> ns/op [<MB/s> MB/s] [<req> req/op]
FILENAME == ARGV[1] && /^BenchmarkRead\// {
	split($1, p, "/"); sub(/-[0-9]+$/, "", p[3])
	if (!(p[2] in seen)) { seen[p[2]] = 1; order[++ncase] = p[2] }
	key = p[2] SUBSEP p[3]
	t[key] = t[key] " " $3
	for (i = 4; i < NF; i++) if ($(i + 1) == "MB/s") size[key] = $i * $3 / 1e3
}
FILENAME == ARGV[2] && /^BenchmarkRead\// {
	split($1, p, "/"); sub(/-[0-9]+$/, "", p[3])
	for (i = 4; i < NF; i++) if ($(i + 1) == "req/op") req[p[2], p[3]] = $i
}
FILENAME == ARGV[3] && /^BenchmarkImportRepo/ { imp = $3 }
FILENAME == ARGV[3] && /^BenchmarkImportLocalGit/ { loc = $3 }
# Every metric the catalog-scale benchmark reports, as name: value.
FILENAME == ARGV[4] && /^BenchmarkCatalogScale/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i += 2) metric[++nmetric] = name " " $(i + 1) ": " $i
}
END {
	print "| case | mount | projection | ratio (native/mount) | FUSE requests/op |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= ncase; i++) {
		c = order[i]; nm = split(t[c, "mount"], m, " "); np = split(t[c, "projection"], n, " ")
		ratios = ""
		for (k = 1; k <= nm && k <= np; k++) if (m[k] > 0) ratios = ratios " " n[k] / m[k]
		if (ratios == "") continue
		r = ((c, "mount") in req) ? sprintf("%.3g", req[c, "mount"]) : "-"
		printf "| %s | %s | %s | %.2f | %s |\n", (c in label) ? label[c] : c, cell(c SUBSEP "mount"), cell(c SUBSEP "projection"), median(ratios), r
	}
	if (imp != "") printf "\nimport of a git repository of 21 skills, 10 MB: %.2f s\n", imp / 1e9
	if (loc != "") printf "import of a repository on this machine at a ref, 30 skills, 20 MB: %.2f s\n", loc / 1e9
	if (nmetric > 0) print "\ncatalog scale:"
	for (i = 1; i <= nmetric; i++) print "  " metric[i]
}' "$reads" "$reqs" "$imports" "$catalog"
