# Sourced by the other scripts: stops with a clear message when this machine
# cannot build skillfs. Building needs the Go version go.mod names (or newer)
# and a C compiler: the SQLite driver is cgo, and without a compiler the
# build fails with the obscure "undefined: sqlite3.Error".
# With "install" as its argument, a missing C compiler is installed
# (Debian's gcc) when run as root with apt-get.
need_toolchain() {
	local want have
	want=$(awk '$1 == "go" { print $2; exit }' go.mod)
	if ! command -v go >/dev/null; then
		echo "skillfs needs Go $want or newer to build, and there is no go command on PATH" >&2
		exit 1
	fi
	have=$(go env GOVERSION)
	have=${have#go}
	if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
		echo "skillfs needs Go $want or newer to build; this go is $have" >&2
		exit 1
	fi
	local cc
	cc=$(go env CC)
	if ! command -v "${cc%% *}" >/dev/null; then
		if [ "${1:-}" = install ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			echo "installing gcc (the SQLite driver is built with cgo)"
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null
		else
			echo "skillfs needs a C compiler to build (the SQLite driver is cgo), and there is no $cc: install one (Debian: apt-get install gcc)" >&2
			exit 1
		fi
	fi
	if [ "$(go env CGO_ENABLED)" != 1 ]; then
		echo "skillfs is built with cgo (the SQLite driver), and CGO_ENABLED is not 1" >&2
		exit 1
	fi
}
