#!/bin/sh
# Checks the first line of a commit message against the Conventional Commits form.
msg=${1:?usage: check-commit-msg.sh MESSAGE}
first=$(printf '%s\n' "$msg" | head -n 1)
if ! printf '%s\n' "$first" | grep -Eq '^(feat|fix|docs|refactor|test|perf|build|chore)(\([a-z0-9-]+\))?!?: .+'; then
	echo "first line must look like 'type(scope): summary'" >&2
	exit 1
fi
if [ "${#first}" -gt 72 ]; then
	echo "first line is ${#first} characters; keep it at most 72" >&2
	exit 1
fi
case "$first" in
*.) echo "drop the trailing period" >&2; exit 1 ;;
esac
echo ok
