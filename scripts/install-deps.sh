#!/usr/bin/env bash
# Install the Debian packages groupcast needs, if any is missing.
# Idempotent and non-interactive; run as root (CI and the README's commands do).
#   install-deps.sh         what the build, the tests and the benchmarks need
#   install-deps.sh --deb   only what `make deb` needs: the packaging tools
#                           below and debian/control's Build-Depends
set -euo pipefail
mode=all
case "${1:-}" in
  "") ;;
  --deb) mode=deb ;;
  *) echo "usage: $0 [--deb]" >&2; exit 2 ;;
esac

pkgs=(
  build-essential cmake pkg-config   # build
  liburing-dev                       # io_uring engines
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev   # BPF programs and skeletons
  linux-libc-dev                     # bpf/vmlinux.h: the UAPI types of the BPF programs
  iproute2 ethtool procps            # network labs: ip netns, veth, offloads, sysctl
  linux-perf                         # bench/group.py F5: where a send's time goes (falls back to getrusage)
  libcap2-bin                        # capsh: tests that drop privileges
  ffmpeg                             # relay e2e test: RTP producer and decoding subscribers
  nftables                           # kernel engine e2e: AUTO must respect an OUTPUT drop rule
  libsodium-dev                      # relay JOIN cookies and DCCP Init Cookies: SipHash (crypto_shorthash)
  libcap-dev                         # relay and engine daemon: drop capabilities after setup
  libmicrohttpd-dev                  # --metrics of the relay, lmsd and the engine daemon: HTTP for Prometheus
  prometheus                         # relay metrics e2e: promtool check metrics, a real scrape (~7 s to install here)
  abigail-tools                      # ctest abi: the library's ABI against abi/libgroupcast.abi
  clang-format-14                    # ctest format: the C sources against .clang-format (scripts/check-format.sh)
  libclang-rt-14-dev                 # -DGC_FUZZ=ON: libFuzzer and the sanitizer runtimes for clang
  libcap2 libsystemd0                # what the unpacked smcrouted needs at run time (see below)
  qemu-system-x86 busybox-static     # DCCP interop: Linux 6.1 guest under TCG (qboot.rom comes with qemu-system-data)
  tcpdump tshark                     # tshark judges DCCP wire formats (test_dccp_wire.py, interop); tcpdump captures
  libnorm-dev libpgm-dev             # bench/ltp.py L2: the NORM and PGM peers (bench/norm_peer.c, pgm_peer.c)
  libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev   # bench/dccp.py P3: the QUIC DATAGRAM peer (bench/quic_peer.c)
  python3-venv python3-setuptools    # make test-python: pip install ./bindings/python into a venv, offline
  strace                             # relay e2e: AUTO keeps the kernel engine after the capability drop (counts syscalls, never times)
)

# Packaging (make deb, make pkg-test), opt-in: not in the list above.
deb_pkgs=(
  debhelper dpkg-dev                 # dpkg-buildpackage, dh (debian/rules)
  lintian                            # make deb: no lintian error
)

export DEBIAN_FRONTEND=noninteractive
updated=
apt_update() { [ -n "$updated" ] || apt-get update -qq; updated=1; }

# apt_install PKG...: apt-get install those of PKG that are not installed.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages (${missing[*]}); run as root" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  # tshark's wireshark-common asks whether non-root users may capture; no
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt_update
  # One retry: an interrupted dpkg run (seen here as unpack files vanishing
  # from /tmp) leaves packages unconfigured; configure them and try again.
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    echo "install-deps: apt-get failed; configuring what was unpacked and retrying once" >&2
    dpkg --configure -a || true
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

if [ "$mode" = deb ]; then
  apt_install "${deb_pkgs[@]}"
  # The Build-Depends of debian/control, read by apt from the source tree.
  src=$(cd "$(dirname "$0")/.." && pwd)
  if ! (cd "$src" && dpkg-checkbuilddeps 2>/dev/null); then
    if [ "$(id -u)" != 0 ]; then
      (cd "$src" && dpkg-checkbuilddeps) || true
      echo "install-deps: missing build dependencies; run as root" >&2
      exit 1
    fi
    echo "install-deps: installing debian/control's Build-Depends"
    apt_update
    apt-get build-dep -y -qq --no-install-recommends "$src" >/dev/null
  fi
  exit 0
fi

apt_install "${pkgs[@]}"

# make go-test (bindings/go): a Go toolchain, Debian's (1.19 on Debian 12,
# which the module keeps to) when none is on PATH.
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || apt_install golang-go

# Multicast routing daemons for the LMS labs: smcroute (static routes) and
# pimd (PIM-SM).  They run only inside lab namespaces, each with its own
# config, socket and pid paths (lab/netlab.py).  The two Debian packages
# conflict with each other, and installing either would start its daemon in
# the root namespace (postinst: deb-systemd-invoke / invoke-rc.d).  So both
# are unpacked, not installed: dpkg-deb -x runs no maintainer script, starts
# nothing, registers nothing; lab/netlab.py looks in /opt/groupcast/routers
# after PATH.
routers=/opt/groupcast/routers
for p in smcroute:smcrouted pimd:pimd; do
  pkg=${p%%:*} bin=${p##*:}
  [ -x "$routers/usr/sbin/$bin" ] && continue
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: $pkg missing; run as root" >&2
    exit 1
  fi
  echo "install-deps: unpacking $pkg into $routers"
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" 2>/dev/null); then
    apt-get update -qq
    (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg")
  fi
  mkdir -p "$routers"
  dpkg-deb -x "$tmp"/"$pkg"_*.deb "$routers"
  rm -rf "$tmp"
done

# pytest drives the end-to-end tests; matplotlib draws the benchmark plots.
py_missing=()
python3 -c 'import pytest' 2>/dev/null || py_missing+=(pytest)
python3 -c 'import matplotlib' 2>/dev/null || py_missing+=(matplotlib)
if ((${#py_missing[@]})); then
  echo "install-deps: installing Python packages ${py_missing[*]}"
  python3 -m pip install -q "${py_missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${py_missing[@]}"
fi
