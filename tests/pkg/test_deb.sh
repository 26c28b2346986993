#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages, end to end (make pkg-test, the last step of make test):
# build them with `make deb`, install the three with apt, build pkg_client.c
# against libgroupcast-dev with nothing but pkg-config (shared and static) and
# run it, run the installed tools, check that every man page is in its
# package, and purge the packages again, also on failure.  Purging matters:
# the other tests run the build tree's binaries (whose RUNPATH names the build
# directory), and nothing of the packages may stay behind for them.
# usage: test_deb.sh        as root; loopback only (127.0.0.1)
# (pipefail: no `| grep -q`, whose early exit would fail the pipe)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
OUT=$SRC/build-deb   # make deb's DEB_OUT
PKGS=(libgroupcast1 libgroupcast-dev groupcast)
[ "$(id -u)" = 0 ] || { echo "test_deb: run as root (it installs packages)" >&2; exit 1; }

installed() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep "ok installed" >/dev/null; }
for p in "${PKGS[@]}"; do
	if dpkg-query -W "$p" >/dev/null 2>&1; then
		echo "test_deb: $p is installed already; this test would replace and purge it." >&2
		echo "test_deb: remove it first: apt-get purge ${PKGS[*]}" >&2
		exit 1
	fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gc-pkg.XXXXXX")
cleanup() {
	local rc=$?
	echo "test_deb: purging ${PKGS[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${PKGS[@]}" >/dev/null 2>&1 || rc=1
	for p in "${PKGS[@]}"; do
		if dpkg-query -W "$p" >/dev/null 2>&1; then
			echo "FAIL: $p still known to dpkg after the purge" >&2
			rc=1
		fi
	done
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

# make deb leaves the checkout as it was (its outputs are git-ignored) and
# writes nothing beside it (dpkg-buildpackage's default is ..).
gitstatus() { git -C "$SRC" status --porcelain --untracked-files=all 2>/dev/null || true; }
before=$(gitstatus)
make -C "$SRC" deb
[ "$(gitstatus)" = "$before" ] || fail "make deb changed git status: $(gitstatus)"

VERSION=$(cd "$SRC" && dpkg-parsechangelog -S Version)
for f in "$SRC"/../*groupcast*_"$VERSION"_*; do
	if [ -e "$f" ]; then fail "make deb left $f beside the source tree"; fi
done
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
debs=()
for p in "${PKGS[@]}"; do
	f=$OUT/${p}_${VERSION}_${ARCH}.deb
	[ -f "$f" ] || { echo "FAIL: make deb made no $f" >&2; exit 1; }
	debs+=("$f")
done

export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${debs[@]}" >"$TMP/apt.log" 2>&1; then
	# stale package lists on a fresh machine: update once and retry
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${debs[@]}" >"$TMP/apt.log" 2>&1 ||
		{ cat "$TMP/apt.log"; echo "FAIL: apt-get install of ${debs[*]}" >&2; exit 1; }
fi
for p in "${PKGS[@]}"; do
	installed "$p" || fail "$p not installed"
	[ "$(dpkg-query -W -f='${Version}' "$p")" = "$VERSION" ] || fail "$p is not version $VERSION"
done

# What each package holds: the library; the headers, .so, .a and .pc; the tools.
has() { dpkg -L "$1" | grep -x "$2" >/dev/null || fail "package $1 lacks $2"; }
has libgroupcast1 "/usr/lib/$MULTIARCH/libgroupcast.so.1"
has libgroupcast-dev "/usr/lib/$MULTIARCH/libgroupcast.so"
has libgroupcast-dev "/usr/lib/$MULTIARCH/libgroupcast.a"
has libgroupcast-dev "/usr/lib/$MULTIARCH/pkgconfig/groupcast.pc"
for h in "$SRC"/include/groupcast/*.h; do
	has libgroupcast-dev "/usr/include/groupcast/$(basename "$h")"
done
has groupcast /usr/bin/groupcast
has groupcast /usr/sbin/lmsd
# the relay's --metrics links libmicrohttpd: shlibs must have made it a dependency
dpkg-query -W -f='${Depends}' groupcast | grep 'libmicrohttpd' >/dev/null ||
	fail "groupcast does not depend on libmicrohttpd: $(dpkg-query -W -f='${Depends}' groupcast)"
# Every man page of docs/man, in its package (dpkg-deb: what the package
# holds, whatever this machine's dpkg path-exclude leaves on disk): section 3
# in libgroupcast-dev, the others in groupcast.
for p in "${PKGS[@]}"; do
	dpkg-deb --contents "$OUT/${p}_${VERSION}_${ARCH}.deb" >"$TMP/$p.contents"
done
for m in "$SRC"/docs/man/man*/*.[0-9]; do
	sec=${m##*.} page=$(basename "$m")
	pkg=groupcast
	[ "$sec" = 3 ] && pkg=libgroupcast-dev
	grep -q " \./usr/share/man/man$sec/$page\.gz\( ->.*\)\?$" "$TMP/$pkg.contents" ||
		fail "$pkg lacks man$sec/$page.gz"
done
if command -v man >/dev/null && [ -f /usr/share/man/man3/gc_ring.3.gz ]; then
	[ "$(man -w gc_ring)" = /usr/share/man/man3/gc_ring.3.gz ] || fail "man -w gc_ring: $(man -w gc_ring 2>&1)"
fi

# A program against libgroupcast-dev, with pkg-config only.
# loads PROGRAM: the libgroupcast.so.1 it loads (usrmerge: /lib is /usr/lib)
loads() { realpath "$(ldd "$1" | awk '$1 == "libgroupcast.so.1" { print $3 }')"; }
PKGLIB=$(realpath "/usr/lib/$MULTIARCH/libgroupcast.so.1")
[ "$(pkg-config --modversion groupcast)" = "$VERSION" ] ||
	fail "pkg-config --modversion groupcast: $(pkg-config --modversion groupcast), not $VERSION"
CC=${CC:-cc}
# shellcheck disable=SC2046
$CC -Wall -Wextra -Werror -o "$TMP/client" "$HERE/pkg_client.c" $(pkg-config --cflags --libs groupcast) ||
	{ echo "FAIL: building pkg_client.c with pkg-config --cflags --libs groupcast" >&2; exit 1; }
[ "$(loads "$TMP/client")" = "$PKGLIB" ] ||
	fail "pkg_client does not load the package's library: $(ldd "$TMP/client")"
"$TMP/client" || fail "pkg_client (shared) failed"
# and with the static library: pkg-config --static for what it needs
# shellcheck disable=SC2046
$CC -Wall -Wextra -Werror -o "$TMP/client_static" "$HERE/pkg_client.c" $(pkg-config --cflags groupcast) \
	"/usr/lib/$MULTIARCH/libgroupcast.a" $(pkg-config --static --libs groupcast | sed 's/-lgroupcast\b//') ||
	{ echo "FAIL: building pkg_client.c against libgroupcast.a" >&2; exit 1; }
ldd "$TMP/client_static" | grep libgroupcast >/dev/null && fail "the static pkg_client loads a shared libgroupcast"
"$TMP/client_static" || fail "pkg_client (static) failed"

# The installed tools: the package's binaries, on the package's library.
# (by their paths: a `make install` copy in /usr/local may come first in PATH)
[ "$(loads /usr/bin/groupcast)" = "$PKGLIB" ] ||
	fail "/usr/bin/groupcast does not load the package's library: $(ldd /usr/bin/groupcast)"
readelf -d /usr/bin/groupcast | grep -E 'RPATH|RUNPATH' >/dev/null && fail "/usr/bin/groupcast has an RPATH"
[ "$(/usr/bin/groupcast --version)" = "groupcast $VERSION" ] ||
	fail "groupcast --version: $(/usr/bin/groupcast --version 2>&1)"
run() { "$@" >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "'$*' failed"; }; }
run /usr/bin/groupcast --help
run /usr/bin/groupcast relay --help
grep -q "samplicator" "$TMP/out" || fail "groupcast relay --help: no relay usage"
run /usr/bin/groupcast engine --help
grep -q -- "--listen" "$TMP/out" || fail "groupcast engine --help: no engine usage"
run /usr/bin/groupcast engines
grep -q "^mmsg  *yes" "$TMP/out" || fail "groupcast engines: mmsg not available"
run /usr/sbin/lmsd --help
grep -q "usage: lmsd" "$TMP/out" || fail "lmsd --help: no usage"

# The systemd units, in the groupcast package, verified where they are
# installed (their ExecStart binaries exist only now), and not enabled.
# (tests/e2e/test_units.py runs their ExecStart lines against the build tree.)
UNITS=(groupcast-relay@.service lmsd.service groupcast-engine.service groupcast-engine.socket)
for u in "${UNITS[@]}"; do
	has groupcast "/lib/systemd/system/$u"
done
if command -v systemd-analyze >/dev/null; then
	# warnings (an unknown key, say) count: verify exits 0 on those
	for u in "${UNITS[@]/groupcast-relay@.service/groupcast-relay@test.service}"; do
		out=$(cd / && systemd-analyze verify --man=no "$u" 2>&1) && [ -z "$out" ] ||
			fail "systemd-analyze verify $u: $out"
	done
fi
for u in lmsd.service groupcast-engine.socket; do
	[ ! -e "/etc/systemd/system/multi-user.target.wants/$u" ] &&
		[ ! -e "/etc/systemd/system/sockets.target.wants/$u" ] || fail "$u was enabled on install"
done

[ $status = 0 ] && echo "test_deb: ok: ${PKGS[*]} $VERSION built, installed, used"
exit $status
