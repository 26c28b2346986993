#!/bin/sh
# The library's modules meet only through lib/core and their public or
# plug-in headers (lib/README.md): no file of lib/<module>/ includes another
# module's internal.h, and lib/core/ includes no module's header at all.
# Every file under lib/ belongs to a module (a folder).  A static check, no
# build needed; lib/ring's own order is tests/e2e/test_ring_layers.py.
# Usage: layers.sh SRCDIR
set -eu
src=$1
cd "$src/lib"
bad=0 seen=0
loose=$(find . -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) | sed 's|^\./||')
if [ -n "$loose" ]; then
	echo "layers: not in a module folder: $(echo "$loose" | tr '\n' ' ')"
	bad=1
fi
for f in */*.c */*.h; do
	mod=${f%%/*}
	# the quoted includes: "dir/name.h" is lib/dir/name.h; "name.h" is the
	# file's own folder when it is there (else bpf/ or the build's: not ours)
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		../*) path=${inc#../} ;;
		*/*) path=$inc ;;
		*) [ -e "$mod/$inc" ] || continue; path=$mod/$inc ;;
		esac
		[ -e "$path" ] || continue
		to=${path%%/*}
		seen=$((seen + 1))
		if [ "$mod" = core ] && [ "$to" != core ]; then
			echo "layers: lib/$f includes lib/$path: lib/core includes no module's header"
			bad=1
		elif [ "$to" != "$mod" ] && [ "${path##*/}" = internal.h ]; then
			echo "layers: lib/$f includes lib/$path: another module's internal header"
			bad=1
		fi
	done
done
# the check sees the includes that matter (a parser that finds none would pass)
if [ "$seen" -lt 20 ]; then
	echo "layers: only $seen includes of lib/ headers found: the check is broken"
	bad=1
fi
[ "$bad" -eq 0 ] && echo "layers: $seen includes of lib/ headers checked, none crosses a module's internal.h"
exit $bad
