#!/bin/sh
# The library's ABI is what groupcast.map and abi/libgroupcast.abi say.
#   abi.sh SRCDIR LIB          check: exported symbols == the map's, and (if
#                              abidiff is here) no ABI change against the baseline
#   abi.sh SRCDIR LIB --update rewrite the baseline (make abi-update), after a
#                              deliberate change that follows the policy in
#                              include/groupcast/version.h
set -eu
src=$1 lib=$2 mode=${3:-check}
base=$src/abi/libgroupcast.abi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# what the map exports: the names between "global:" and "local:" of each node
sed -n '/global:/,/local:/p' "$src/groupcast.map" | grep -o '^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*;' |
	tr -d ' \t;' | sort > "$tmp/map"
# what the library exports (functions and data, not the version nodes)
nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort > "$tmp/lib"
if ! cmp -s "$tmp/map" "$tmp/lib"; then
	echo "groupcast.map and $lib disagree (< only in the map, > only in the library):"
	diff "$tmp/map" "$tmp/lib" | grep '^[<>]'
	echo "Add new functions to a new version node of groupcast.map (see its header)."
	exit 1
fi
n=$(wc -l < "$tmp/map")
if ! command -v abidw >/dev/null; then
	if [ "${CI:-}" = true ]; then
		echo "abi: abigail-tools (abidw, abidiff) missing: CI must compare the ABI (scripts/install-deps.sh)"
		exit 1
	fi
	echo "$n exported symbols match groupcast.map (abigail-tools not installed: ABI not compared)"
	exit 0
fi
# Types only the library sees (the opaque struct gc_ring, gc_zone...) are
# dropped: their layout is not part of the ABI.
opts="--no-corpus-path --no-comp-dir-path --short-locs --hd $src/include --drop-private-types"
if [ "$mode" = --update ]; then
	mkdir -p "$src/abi"
	abidw $opts --out-file "$base" "$lib"
	echo "wrote $base"
	exit 0
fi
abidw $opts --out-file "$tmp/now.abi" "$lib"
if ! abidiff --no-added-syms "$base" "$tmp/now.abi" > "$tmp/diff" 2>&1; then
	cat "$tmp/diff"
	echo "The ABI differs from abi/libgroupcast.abi.  If the change is deliberate and follows the"
	echo "policy in include/groupcast/version.h, run 'make abi-update' and commit the baseline."
	exit 1
fi
if ! abidiff "$base" "$tmp/now.abi" > "$tmp/diff" 2>&1; then
	cat "$tmp/diff"
	echo "Functions were added without updating abi/libgroupcast.abi: run 'make abi-update'."
	exit 1
fi
echo "$n exported symbols match groupcast.map; ABI equal to abi/libgroupcast.abi"
