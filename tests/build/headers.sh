#!/bin/sh
# Every public header compiles on its own, as the first include, in C11 and
# in C++17, with warnings as errors (liburing's test_build does the same).
# Usage: headers.sh SRCDIR CC CXX
set -eu
src=$1 cc=$2 cxx=$3
n=0
for h in "$src"/include/groupcast/*.h; do
	name=groupcast/$(basename "$h")
	for lang in c c++; do
		if [ "$lang" = c ]; then comp=$cc std=c11; else comp=$cxx std=c++17; fi
		if ! out=$(printf '#include <%s>\nint main(void) { return 0; }\n' "$name" |
			   "$comp" -x "$lang" -std="$std" -Wall -Wextra -Werror -pedantic -fsyntax-only \
				   -I"$src/include" - 2>&1); then
			echo "$name does not compile alone as $lang ($std):"
			echo "$out"
			exit 1
		fi
		n=$((n + 1))
	done
done
echo "$n header builds ok"
