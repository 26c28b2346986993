/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the relay's control protocol (tools/relay/control.c),
 * the one input of broadcast mode that anyone on the network can send.
 *
 * Input: one flags byte (bit 0: IPv6 source, bit 1: --allow-local-subscribers,
 * bits 2-3: seconds the clock advances between requests), the source address
 * (4 or 16 bytes) and port (2 bytes), then requests separated by 0xff bytes,
 * all from that source.  "$C" in a request is replaced with the last COOKIE
 * the relay answered, so that the fuzzer reaches the verified paths too.
 *
 * What must hold: no crash or sanitizer report; a reply that is not "OK" is
 * never longer than its request (only a request with a good cookie may get
 * more); the table never holds a subscriber that control_check_subscriber()
 * refuses, nor more than --max-per-source from one source.
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target relay_control_fuzz
 *   build-fuzz/fuzz/relay_control_fuzz -max_total_time=60 fuzz/corpus/relay_control
 */
#include "relay.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t fake_now = 1000000000000ull;

/* What control.c takes from stats.c and fanout.c. */
uint64_t relay_now_ns(void)
{
	return fake_now;
}

int relay_family_index(int family)
{
	return family == AF_INET6 ? 1 : 0;
}

static struct relay R;

/* Whether msg has cookie= with one of the cookies the relay gave out. */
static bool shows_cookie(const char *msg, size_t len, char seen[][16], size_t nseen)
{
	for (size_t i = 0; i + 7 + 16 <= len; i++) {
		if (strncasecmp(msg + i, "cookie=", 7))
			continue;
		size_t v = i + 7 + (i + 9 + 16 <= len && !strncasecmp(msg + i + 7, "0x", 2) ? 2 : 0);
		for (size_t k = 0; k < nseen; k++)
			if (!strncasecmp(msg + v, seen[k], 16))
				return true;
	}
	return false;
}

static void setup(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	R.rtp = true;
	R.max_per_source = 4;
	R.ctl_rate = 1000;
	R.cookie_s = 2;
	R.expire_s = 30;
	R.data_fd[0] = R.data_fd[1] = 3;
	R.own_port[0] = 5004;
	R.own_port[1] = 5005;
	R.own_port[2] = 5006;
	if (subs_init(&R.subs, 16) || control_local_addrs(&R))
		abort();
	memset(R.cookie_key, 0x5a, sizeof(R.cookie_key));
	R.rate = calloc(CTL_RATE_SLOTS, sizeof(*R.rate));
	if (!R.rate)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	if (size < 1)
		return 0;
	uint8_t flags = data[0];
	size_t alen = (flags & 1) ? 16 : 4;
	if (size < 1 + alen + 2)
		return 0;
	struct sockaddr_storage from = { 0 };
	if (flags & 1) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&from;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, data + 1, 16);
		memcpy(&s6->sin6_port, data + 17, 2);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&from;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, data + 1, 4);
		memcpy(&s4->sin_port, data + 5, 2);
	}
	R.allow_local = flags & 2;
	uint64_t step = (uint64_t)((flags >> 2) & 3) * 1000000000ull;
	const uint8_t *p = data + 1 + alen + 2, *end = data + size;
	char cookie[17] = "0000000000000000", seen[64][16];
	size_t nseen = 0;
	while (p < end) {
		const uint8_t *q = memchr(p, 0xff, (size_t)(end - p));
		if (!q)
			q = end;
		char msg[CTL_MAX_LEN + 64], out[1400];
		size_t len = 0;
		for (const uint8_t *c = p; c < q && len < sizeof(msg) - 17; c++) {
			if (c + 1 < q && c[0] == '$' && c[1] == 'C') {
				memcpy(msg + len, cookie, 16);
				len += 16;
				c++;
			} else {
				msg[len++] = (char)*c;
			}
		}
		size_t n = control_handle(&R, msg, len, &from, out, sizeof(out));
		if (n > sizeof(out) || (n > len && !shows_cookie(msg, len, seen, nseen)))
			abort(); /* a source that proved nothing got more than it sent */
		if (n > 7 + 16 && !memcmp(out, "COOKIE ", 7)) {
			const char *sp = memchr(out + 7, ' ', n - 7);
			if (sp && (size_t)(out + n - sp) > 16) {
				memcpy(cookie, sp + 1, 16);
				if (nseen < 64)
					memcpy(seen[nseen++], cookie, 16);
			}
		}
		fake_now += step;
		p = q + (q < end);
	}
	char why[96];
	for (uint32_t k = 0; k < R.subs.nactive; k++) {
		const struct sub *s = &R.subs.slot[R.subs.active[k]];
		if (control_check_subscriber(&R, &s->addr, why, sizeof(why)) ||
		    subs_per_source(&R.subs, &s->addr) > R.max_per_source)
			abort();
	}
	/* start every input from an empty table */
	while (R.subs.nactive)
		subs_remove(&R.subs, &R.subs.slot[R.subs.active[0]]);
	return 0;
}
