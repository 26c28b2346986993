/* SPDX-License-Identifier: MIT */
/*
 * p3_video.h - what the traffic programs of bench/dccp.py's P2 and P3
 * experiments share: bench/dccp_traffic.c (UDP, TCP, gc_dccp) and
 * bench/quic_peer.c (QUIC DATAGRAM).  bench/dccp.py parses what they print
 * the same way, so it is written in one place:
 *
 *   - the packet header: sequence number, frame type and the application's
 *     send time (CLOCK_REALTIME, so that it compares with the capture's
 *     timestamps);
 *   - the frame numbering: every 10th packet (seq % 10 == 0) is an I-frame
 *     (type 1), the others B/P (type 0);
 *   - the per-packet lines: "S,seq,type,t_app_ns,dead" from the sender,
 *     "R,seq,type,t_app_ns,t_rx_ns" from the receiver;
 *   - the "video" late data choice: while 3 or more packets are queued,
 *     B/P packets are dropped, oldest first, and I-frame packets only if
 *     that is not enough;
 *   - the numeric options' check.
 *
 * Static inline functions only; each program includes it once.
 */
#ifndef P3_VIDEO_H
#define P3_VIDEO_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct p3_hdr {
	uint64_t seq;
	uint64_t t_app_ns;
	uint32_t type;
} __attribute__((packed));

static inline uint64_t p3_now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1: an I-frame packet, 0: B/P (10 % I-frames) */
static inline unsigned p3_frame_type(uint64_t seq)
{
	return seq % 10 == 0;
}

/* A packet of size bytes: the header, stamped now, then zeros. */
static inline void p3_fill(uint8_t *b, unsigned size, uint64_t seq)
{
	struct p3_hdr h = { .seq = seq, .t_app_ns = p3_now_ns(CLOCK_REALTIME), .type = p3_frame_type(seq) };
	memset(b, 0, size);
	memcpy(b, &h, sizeof(h));
}

/* The sender's line: dead 0 when the application sends the packet, 1 when
 * the late data choice drops it. */
static inline void p3_log_sent(const uint8_t *b, int dead)
{
	struct p3_hdr h;
	memcpy(&h, b, sizeof(h));
	printf("S,%" PRIu64 ",%u,%" PRIu64 ",%d\n", h.seq, h.type, h.t_app_ns, dead);
}

/* The receiver's line for a packet of len bytes (none if it is shorter
 * than the header). */
static inline void p3_log_rx(const uint8_t *b, size_t len)
{
	struct p3_hdr h;
	if (len < sizeof(h))
		return;
	memcpy(&h, b, sizeof(h));
	printf("R,%" PRIu64 ",%u,%" PRIu64 ",%" PRIu64 "\n", h.seq, h.type, h.t_app_ns,
	       p3_now_ns(CLOCK_REALTIME));
}

/*
 * The "video" policy, in two passes over the queue, oldest first: whether
 * pass (0: B/P packets, 1: I-frames) drops a packet of this type while
 * queued packets (the newest one counts: it was just sent) are still the
 * application's.
 */
#define P3_VIDEO_PASSES 2
static inline int p3_video_drops(unsigned pass, unsigned type, unsigned queued)
{
	return queued >= 3 && type == (pass == 0 ? 0u : 1u);
}

/* The value v of option opt, a number in lo..hi; else the message and exit(2). */
static inline unsigned p3_num(const char *prog, const char *opt, const char *v, unsigned lo, unsigned hi)
{
	char *end;
	errno = 0;
	unsigned long x = strtoul(v ? v : "", &end, 10);
	if (!v || errno || *end || end == v || x < lo || x > hi) {
		fprintf(stderr, "%s: %s: '%s' is not a number in %u..%u\n", prog, opt, v ? v : "",
			lo, hi);
		exit(2);
	}
	return (unsigned)x;
}

#endif
