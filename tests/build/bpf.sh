#!/bin/sh
# The BPF programs build without the build machine's kernel BTF and for
# another architecture: each bpf/*.bpf.c compiles with the build's own flags
# (BUILDDIR/bpf/clang-bpf-flags) while /sys/kernel/btf/vmlinux is hidden (a
# private mount namespace, when we may make one), once for the flags' own
# __TARGET_ARCH and once with __TARGET_ARCH_arm64 (or _x86 when built on arm64).
# Usage: bpf.sh SRCDIR BUILDDIR CLANG
set -eu
src=$1 build=$2 clang=$3
btf=/sys/kernel/btf/vmlinux
if [ "${GC_BPF_SH_INNER:-}" != 1 ] && [ -e "$btf" ] && command -v unshare >/dev/null &&
   unshare -m true 2>/dev/null; then
	exec env GC_BPF_SH_INNER=1 unshare -m sh -c 'mount --bind /dev/null "$0" && exec sh "$1" "$2" "$3" "$4"' \
		"$btf" "$0" "$src" "$build" "$clang"
fi
if [ -s "$btf" ]; then hidden="BTF present"; else hidden="no kernel BTF"; fi
flags=$(tr '\n' ' ' < "$build/bpf/clang-bpf-flags")
case "$flags" in
*-D__TARGET_ARCH_x86*) other=arm64 ;;
*) other=x86 ;;
esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0
for prog in "$src"/bpf/*.bpf.c; do
	for arch in own "$other"; do
		# shellcheck disable=SC2086  # one flag per word
		set -- $flags
		if [ "$arch" != own ]; then
			set -- "$@" -U__TARGET_ARCH_x86 -U__TARGET_ARCH_arm64 -D__TARGET_ARCH_$arch
		fi
		if ! msg=$("$clang" "$@" -Werror -c "$prog" -o "$out/p.o" 2>&1); then
			echo "$(basename "$prog") ($arch, $hidden) does not build:"
			echo "$msg"
			exit 1
		fi
		n=$((n + 1))
	done
done
echo "$n BPF builds ok ($hidden)"
