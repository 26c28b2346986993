#!/bin/sh
# SPDX-License-Identifier: MIT
# Install smoke test: install BUILD into a temporary prefix, build example.c
# against it with pkg-config (shared with rpath, and static), and send with
# every engine to loopback receivers (127.0.0.1 and ::1 only).
# usage: run.sh BUILD_DIR        (ctest runs it after the build)
set -eu
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gc-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" || { cat "$TMP/install.log"; exit 1; }
# every public header (common.h, which the module headers include, too)
for h in "$HERE"/../../include/groupcast/*.h; do
	f=include/groupcast/$(basename "$h")
	[ -f "$PREFIX/$f" ] || fail "not installed: $f"
done
for f in share/man/man3/gc_send.3 share/man/man3/gc_lms.3 share/man/man3/gc_lms_dmcast.3 share/man/man3/gc_ltp.3 share/man/man3/gc_dccp.3 \
         share/man/man7/groupcast.7; do
	[ -f "$PREFIX/$f" ] || fail "not installed: $f"
done
PC=$(find "$PREFIX" -name groupcast.pc | head -n 1)
[ -n "$PC" ] || { echo "FAIL: groupcast.pc not installed" >&2; exit 1; }
PCDIR=$(dirname "$PC")
LIBDIR=$(PKG_CONFIG_PATH=$PCDIR pkg-config --variable=libdir groupcast)

# The installed .pc must describe the prefix it was installed to.
pc() { PKG_CONFIG_PATH=$PCDIR pkg-config "$@" groupcast; }
if [ "$(realpath -m "$LIBDIR")" != "$(realpath -m "$(dirname "$PCDIR")")" ]; then
	fail "groupcast.pc says libdir=$LIBDIR, but it was installed under $PREFIX" \
	     "(configure-time prefix baked in; 'cmake --install --prefix' does not relocate it)." \
	     "Going on with pkg-config --define-prefix."
	pc() { PKG_CONFIG_PATH=$PCDIR pkg-config --define-prefix "$@" groupcast; }
	LIBDIR=$(dirname "$PCDIR")
fi

# A sanitized library needs the sanitizer runtime in the program too.
SAN=
grep -q '^GC_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=address,undefined"

CC=${CC:-cc}
# shellcheck disable=SC2046
$CC $SAN -o "$TMP/ex_shared" "$HERE/example.c" $(pc --cflags --libs) -Wl,-rpath,"$LIBDIR" ||
	{ echo "FAIL: building example.c against the shared library" >&2; exit 1; }
# shellcheck disable=SC2046
$CC $SAN -o "$TMP/ex_static" "$HERE/example.c" $(pc --cflags) "$LIBDIR/libgroupcast.a" \
	$(pc --static --libs | sed 's/-lgroupcast//') ||
	{ echo "FAIL: building example.c against libgroupcast.a" >&2; exit 1; }
ldd "$TMP/ex_shared" | grep -q "$LIBDIR/libgroupcast.so" || fail "ex_shared does not load $LIBDIR/libgroupcast.so"
ldd "$TMP/ex_static" | grep -q libgroupcast && fail "ex_static loads a shared libgroupcast"

# Receivers: K4 consecutive ports on 127.0.0.1, K6 on ::1; each must get MSG once.
RECV='
import socket, sys, random, select, time
msg, k4, k6, portfile = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def bind_run(fam, host, k):
    for _ in range(100):
        base, socks = random.randint(20000, 60000), []
        try:
            for i in range(k):
                s = socket.socket(fam, socket.SOCK_DGRAM); socks.append(s); s.bind((host, base + i))
            return base, socks
        except OSError:
            for s in socks: s.close()
    sys.exit("no free port range")
b4, s4 = bind_run(socket.AF_INET, "127.0.0.1", k4)
b6, s6 = bind_run(socket.AF_INET6, "::1", k6)
open(portfile + ".tmp", "w").write("%d %d\n" % (b4, b6))
import os; os.rename(portfile + ".tmp", portfile)
got, bad, end = {}, 0, time.time() + 10
socks = s4 + s6
while len(got) < len(socks) and time.time() < end:
    for s in select.select(socks, [], [], 0.5)[0]:
        data = s.recv(70000)
        if data != msg or s in got: bad += 1
        got[s] = data
time.sleep(0.2)
for s in socks:
    s.setblocking(False)
    try: s.recv(70000); bad += 1
    except BlockingIOError: pass
print("receivers: %d of %d got the message, %d unexpected" % (len(got), len(socks), bad))
sys.exit(0 if len(got) == len(socks) and bad == 0 else 1)
'
run_one() { # BINARY ENGINE
	msg="groupcast install test $2 $$"
	rm -f "$TMP/ports"
	python3 -c "$RECV" "$msg" 3 2 "$TMP/ports" >"$TMP/recv.log" 2>&1 &
	rpid=$!
	i=0
	while [ ! -f "$TMP/ports" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	[ -f "$TMP/ports" ] || { kill "$rpid" 2>/dev/null; fail "receivers did not start"; return; }
	read -r p4 p6 <"$TMP/ports"
	rc=0
	"$1" "$2" "$msg" "127.0.0.1:$p4+3" "[::1]:$p6+2" >"$TMP/ex.log" 2>&1 || rc=$?
	if [ $rc -eq 3 ]; then
		kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null || true
		case $2 in # these need nothing special: they must not be skipped
		auto | loop | mmsg) fail "$(basename "$1") $2 not available: $(cat "$TMP/ex.log")" ;;
		*) echo "SKIP $(basename "$1") $2: $(cat "$TMP/ex.log")" ;;
		esac
		return
	fi
	rrc=0
	wait "$rpid" || rrc=$?
	if [ $rc -ne 0 ] || [ $rrc -ne 0 ]; then
		fail "$(basename "$1") $2: example rc $rc: $(cat "$TMP/ex.log"); $(cat "$TMP/recv.log")"
	else
		echo "ok $(basename "$1") $2: $(cat "$TMP/ex.log"); $(cat "$TMP/recv.log")"
	fi
}
for bin in "$TMP/ex_shared" "$TMP/ex_static"; do
	for engine in auto loop mmsg uring uring_zc kernel; do
		run_one "$bin" "$engine"
	done
done
[ "$status" -eq 0 ] && echo "install smoke test: ok"
exit $status
