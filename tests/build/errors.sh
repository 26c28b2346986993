#!/bin/sh
# The library's error convention (lib/core/core.h, lib/README.md): inside
# lib/ a failing function returns a negative errno and records the message
# with gc_errf(); only an exported function (GC_EXPORT, the API boundary)
# sets errno, by gc_err()/gc_err_ptr() or, refusing an argument before it
# calls anything, gc_seterr().  This static check fails if a file under lib/
# other than lib/core/ assigns errno, or calls gc_seterr(), gc_err() or
# gc_err_ptr(), in a function that is not marked GC_EXPORT, or in a macro
# (#define) that is not listed below.  No build needed.
#
# The parse is the code's style (.clang-format): a function's body starts
# with "{" in column 0 and ends with "}" in column 0; the lines just above
# the "{" (after the last blank line, "}" or ";") are its head, and it is
# exported when the head carries GC_EXPORT.  Comments are ignored.
# Usage: errors.sh SRCDIR
set -eu
src=$1
cd "$src/lib"

# Functions (or macros) that may set errno although they are not exported,
# one "file:name" a line, each with its reason in a comment above it.
allowed='
# used only inside gc_lms_opt_parse(), an exported function: counts a
# malformed options area and refuses it with EBADMSG
lms/lms.c:BAD_OPTIONS
'

files=$(find . -path ./core -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print | sed 's|^\./||' | sort)
[ -n "$files" ] || { echo "errors: no sources under $src/lib"; exit 1; }

# shellcheck disable=SC2086 # one argument per file
out=$(awk -v allowed="$allowed" '
	function sets(c) {
		if (c ~ /(^|[^A-Za-z0-9_.>])errno[ \t]*=[^=]/) return "assigns errno"
		if (c ~ /(^|[^A-Za-z0-9_])gc_(seterr|err|err_ptr)[ \t]*\(/) return "calls gc_seterr()/gc_err()"
		return ""
	}
	FNR == 1 { incom = 0; head = ""; inbody = 0; inmac = 0 }
	{
		# drop comments: /* ... */ (also across lines) and //
		line = $0; code = ""
		while (line != "") {
			if (incom) {
				i = index(line, "*/")
				if (!i) { line = ""; break }
				line = substr(line, i + 2); incom = 0
			} else {
				i = index(line, "/*"); j = index(line, "//")
				if (j && (!i || j < i)) { code = code substr(line, 1, j - 1); line = ""; break }
				if (!i) { code = code line; line = ""; break }
				code = code substr(line, 1, i - 1); line = substr(line, i + 2); incom = 1
			}
		}
	}
	# a macro: its name, on every line of its definition
	!inbody && code ~ /^#[ \t]*define[ \t]/ {
		mac = code; sub(/^#[ \t]*define[ \t]+/, "", mac); sub(/[^A-Za-z0-9_].*/, "", mac)
		inmac = 1
	}
	!inbody && inmac {
		if (sets(code) != "" && index(allowed, "\n" FILENAME ":" mac "\n") == 0) {
			printf "errors: lib/%s:%d: macro %s %s\n", FILENAME, FNR, mac, sets(code)
			bad++
		}
		if ($0 !~ /\\$/) inmac = 0
		head = ""
		next
	}
	!inbody && /^\{/ {
		inbody = 1; exported = (head ~ /GC_EXPORT/)
		name = head; sub(/\(.*/, "", name); sub(/.*[^A-Za-z0-9_]/, "", name)
		bodies++; if (exported) exports++
		next
	}
	inbody && /^\}/ { inbody = 0; head = ""; next }
	!inbody {
		if (code ~ /^[ \t]*$/ || code ~ /[;}][ \t]*$/ || code ~ /^#/) head = ""
		else head = head " " code
		next
	}
	inbody && !exported {
		what = sets(code)
		if (what != "" && index(allowed, "\n" FILENAME ":" name "\n") == 0) {
			printf "errors: lib/%s:%d: %s() is not GC_EXPORT and %s\n", FILENAME, FNR, name, what
			bad++
		}
	}
	END {
		printf "bodies %d exports %d bad %d\n", bodies, exports, bad
	}
' $files)
echo "$out" | grep -v '^bodies ' || true
set -- $(echo "$out" | sed -n 's/^bodies //p')
bodies=$1 exports=$3 bad=$5
# the parse sees the code (one that finds no function, or no exported one,
# would pass anything)
if [ "$bodies" -lt 500 ] || [ "$exports" -lt 60 ]; then
	echo "errors: only $bodies function bodies, $exports of them exported, found: the check is broken"
	exit 1
fi
if [ "$bad" -ne 0 ]; then
	echo "errors: $bad places set errno inside the library (return -errno, gc_errf(); lib/core/core.h)"
	exit 1
fi
echo "errors: $bodies function bodies checked; errno, gc_seterr() and gc_err() only in the $exports exported ones"
