/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * bpf/vmlinux.h - the kernel types the BPF programs use, from the UAPI headers
 * (Debian: linux-libc-dev), not from a BTF dump of some kernel.
 *
 * Why not `bpftool btf dump file /sys/kernel/btf/vmlinux format c` (the usual
 * vmlinux.h, which this build made until now):
 *  - it needs a kernel with BTF, the build machine's own: a build host
 *    without /sys/kernel/btf/vmlinux (a container, an older or custom kernel)
 *    could not build the library at all;
 *  - its types are that kernel's and that architecture's: committing one
 *    (dumped from a Debian kernel's vmlinux, taken from its -dbg package) means
 *    ~3 MB per architecture to keep in step, for five structs;
 *  - it marks every struct preserve_access_index, so even `skb->protocol`
 *    becomes a CO-RE relocation that libbpf resolves against the running
 *    kernel's BTF at load time, though none of these fields ever moves.
 * Everything the programs in bpf/ (and bench/lms_cost.bpf.c) touch is UAPI:
 * struct __sk_buff, struct bpf_fib_lookup, the BPF_* flags and return codes,
 * ethhdr/iphdr/ipv6hdr/udphdr, TC_ACT_*, ETH_P_*, IPPROTO_*.  Those layouts are
 * a stable ABI, and linux-libc-dev ships them for every architecture; the
 * instructions compiled from them are the kernel's own offsets, without
 * relocations.  A program that needs a kernel-internal type (a kprobe on a
 * struct sock field) would need BTF and CO-RE again: add that type here from
 * a BTF dump with preserve_access_index, not the whole kernel.
 *
 * The name stays vmlinux.h so that the programs read like every other libbpf
 * program.  fanout.bpf.c needs BPF_FIB_LOOKUP_SRC and _SKIP_NEIGH, which Linux
 * 6.1's stable headers gained later: Debian 12's linux-libc-dev 6.1.187 has
 * them; an older one fails with "undeclared identifier" (upgrade it).
 */
#ifndef GROUPCAST_BPF_VMLINUX_H
#define GROUPCAST_BPF_VMLINUX_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>

#endif /* GROUPCAST_BPF_VMLINUX_H */
