#!/bin/sh
# The C sources follow .clang-format (clang-format 14, Debian's).
#   scripts/check-format.sh          list what differs, exit 1 if anything does (CI: ctest "format")
#   scripts/check-format.sh --fix    reformat those files in place
# Checked: every tracked .c and .h file (library, tools, tests, fuzz, bench, BPF).
set -eu
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CF" >/dev/null 2>&1; then
	echo "check-format: $CF not found (apt-get install clang-format-14, or set CLANG_FORMAT)" >&2
	exit 2
fi
files=$(git ls-files '*.c' '*.h')
if [ "${1:-}" = "--fix" ]; then
	# shellcheck disable=SC2086
	"$CF" -i $files
	exit 0
fi
bad=0
for f in $files; do
	if ! "$CF" --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "check-format: $f differs from .clang-format (scripts/check-format.sh --fix)" >&2
		bad=1
	fi
done
exit $bad
