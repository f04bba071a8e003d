#!/usr/bin/env bash
# The main job, end to end on the embedded default: builds skillfs, starts
# `skillfs serve` on a fresh data directory (SQLite index, the bundled example
# skills as builtins), opens a session, reads a skill through the mount and
# shows the activation and the tools to load. --keep leaves the daemon running.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
need_toolchain
keep=false
[ "${1:-}" = --keep ] && keep=true

if [ "$(id -u)" != 0 ]; then
	echo "run as root: the daemon mounts a FUSE filesystem" >&2
	exit 1
fi
if [ ! -e /dev/fuse ]; then
	echo "/dev/fuse is missing: load the fuse module (modprobe fuse)" >&2
	exit 1
fi

bin=$(mktemp -d)/skillfs
go build -o "$bin" ./cmd/skillfs
export SKILLFS_HOME=${SKILLFS_HOME:-$(mktemp -d)/skillfs}
log=$SKILLFS_HOME.log
mkdir -p "$SKILLFS_HOME"

"$bin" serve >"$log" 2>&1 &
pid=$!
stop() { kill -TERM "$pid" 2>/dev/null && wait "$pid" || true; }
$keep || trap stop EXIT
for _ in $(seq 100); do
	grep -q '^skillfs ready' "$log" && break
	kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
	sleep 0.1
done
grep '^skillfs ready' "$log"

echo; echo "== the catalog (bundled example skills)"
"$bin" skill list
"$bin" user add alice --department eng >/dev/null

echo; echo "== alice installs her own skill, which needs a tool and an MCP server"
"$bin" tool add git >/dev/null
"$bin" mcp add github >/dev/null
src=$(mktemp -d)/pr-review
mkdir -p "$src"
cat >"$src/SKILL.md" <<'SKILL'
---
name: pr-review
description: Review a pull request for correctness, tests and clear commit messages.
skill_dependencies: [commit-messages]
tool_dependencies: [git]
mcp_dependencies: [github]
---
# Reviewing a pull request
Fetch the branch with git, read the diff, check the commits with the commit-messages skill.
SKILL
"$bin" skill import "$src" --as alice

echo; echo "== a session for alice asking for release-notes and pr-review (dependencies come along)"
out=$("$bin" session create --user alice --skills release-notes,pr-review --json)
echo "$out"
id=$(printf '%s' "$out" | sed -n 's/.*"id": "\([0-9a-f]*\)".*/\1/p')
path=$(printf '%s' "$out" | sed -n 's/.*"path": "\([^"]*\)".*/\1/p')

echo; echo "== what the agent sees"
ls -l "$path" "$path/commit-messages/scripts"
echo; echo "== the agent reads release-notes/SKILL.md and pr-review/SKILL.md"
head -n 5 "$path/release-notes/SKILL.md"
cat "$path/pr-review/SKILL.md" >/dev/null
echo; echo "== the agent runs a skill script"
"$path/commit-messages/scripts/check-commit-msg.sh" "feat(demo): read skills through skillfs"
echo; echo "== activations and tools to load"
"$bin" session activations "$id"
echo; echo "== the prompt block"
"$bin" session prompt "$id"

if $keep; then
	echo
	echo "daemon running (pid $pid, log $log)"
	echo "  export SKILLFS_HOME=$SKILLFS_HOME"
	echo "  $bin session list"
	echo "  kill $pid    # stops it and unmounts"
fi
