/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the relay's control protocol (tools/relay/control.c) without a
 * network: the cookie handshake, replies never longer than an unverified
 * request, cookie expiry, KEEPALIVE/LEAVE bound to the cookie, per-source
 * limits, the request budget, refused addresses and the SSRC index.
 */
#include "relay.h"
#include "check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fake_now = 5000000000000ull;

uint64_t relay_now_ns(void)
{
	return fake_now;
}

int relay_family_index(int family)
{
	return family == AF_INET6 ? 1 : 0;
}

static struct relay R;
static char out[1400];

static struct sockaddr_storage v4(const char *a, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s = (struct sockaddr_in *)&ss;
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, a, &s->sin_addr);
	return ss;
}

/* One request; the reply, NUL-terminated, in out. */
static size_t req(const struct sockaddr_storage *from, const char *msg)
{
	size_t n = control_handle(&R, msg, strlen(msg), from, out, sizeof(out) - 1);
	out[n] = '\0';
	return n;
}

static const char *pad(const char *msg)
{
	static char b[CTL_MAX_LEN + 1];
	snprintf(b, sizeof(b), "%-*s", CTL_JOIN_MIN, msg);
	return b;
}

/* The full handshake for port; returns the cookie (0 on failure). */
static uint64_t join(const struct sockaddr_storage *from, unsigned port)
{
	char m[128];
	snprintf(m, sizeof(m), "JOIN %u", port);
	unsigned long long c = 0;
	unsigned p = 0;
	if (!req(from, pad(m)) || sscanf(out, "COOKIE %u %llx", &p, &c) != 2 || p != port)
		return 0;
	snprintf(m, sizeof(m), "JOIN %u cookie=%016llx", port, c);
	req(from, m);
	return strncmp(out, "OK JOIN", 7) ? 0 : (uint64_t)c;
}

/* The handshake with options opts (relay=...); out has the last reply. */
static void join_opts(const struct sockaddr_storage *from, unsigned port, const char *opts)
{
	char m[160];
	snprintf(m, sizeof(m), "JOIN %u %s", port, opts);
	unsigned long long c = 0;
	unsigned p = 0;
	if (!req(from, pad(m)) || sscanf(out, "COOKIE %u %llx", &p, &c) != 2)
		return;
	snprintf(m, sizeof(m), "JOIN %u %s cookie=%016llx", port, opts, c);
	req(from, m);
}

/* The loop rule (relay= in JOIN, path= in replies) and the RTP dedupe. */
static void relays(void)
{
	struct sockaddr_storage e = v4("198.51.100.20", 40000);
	R.relay_id = 0xa1;
	R.up_cur = -1;
	R.nup = 0;
	uint32_t before = R.subs.nactive;
	join_opts(&e, 7000, "relay=a1");
	CHECK(!strncmp(out, "ERR loop: relay=00000000000000a1 is this relay", 46), "self: '%s'", out);
	CHECK(R.c.ctl_loop == 1 && R.subs.nactive == before, "self joined");
	/* this relay takes its stream from b2, which takes it from c3 */
	R.nup = 1;
	R.up_cur = 0;
	R.up[0].st = UP_ACTIVE;
	R.up[0].path[0] = 0xb2;
	R.up[0].path[1] = 0xc3;
	R.up[0].npath = 2;
	join_opts(&e, 7000, "relay=c3");
	CHECK(strstr(out, "ERR loop: relay=00000000000000c3 is upstream of this relay"), "c3: '%s'", out);
	CHECK(R.c.ctl_loop == 2 && R.subs.nactive == before, "c3 joined");
	join_opts(&e, 7000, "relay=d4");
	CHECK(!strncmp(out, "OK JOIN 198.51.100.20 7000 ", 27) &&
		      strstr(out, " path=00000000000000a1.00000000000000b2.00000000000000c3\n"),
	      "d4: '%s'", out);
	struct sockaddr_storage d7 = v4("198.51.100.20", 7000);
	struct sub *s = subs_find(&R.subs, &d7);
	CHECK(s && s->relay_id == 0xd4, "d4 not a relay subscriber");
	unsigned long long c = s ? s->cookie : 0;
	/* the path changes to one with d4 in it: its next KEEPALIVE removes it */
	R.up[0].path[2] = 0xd4;
	R.up[0].npath = 3;
	char m[96];
	snprintf(m, sizeof(m), "KEEPALIVE 7000 cookie=%016llx", c);
	req(&e, m);
	CHECK(!strncmp(out, "ERR loop: relay=00000000000000d4", 32) && !subs_find(&R.subs, &d7),
	      "keepalive of a loop: '%s'", out);
	/* a path of 8 relays: no deeper */
	R.up[0].npath = 7;
	join_opts(&e, 7000, "relay=e5");
	CHECK(strstr(out, "would be deeper than the hop limit"), "depth: '%s'", out);
	CHECK(R.c.ctl_loop == 4, "ctl_loop %llu", (unsigned long long)R.c.ctl_loop);
	R.up[0].npath = 2;
	/* a plain subscriber's reply has no path */
	join_opts(&e, 7002, "");
	CHECK(!strncmp(out, "OK JOIN", 7) && !strstr(out, "path="), "plain: '%s'", out);
	join_opts(&e, 7004, "relay=0");
	CHECK(!strncmp(out, "ERR bad relay=", 14), "relay=0: '%s'", out);

	/* dedupe: in order, a repeat, a switch with a gap, the 16-bit wrap */
	memset(&R.dd, 0, sizeof(R.dd));
	CHECK(upstream_dedupe(&R, 0x1234, 65530) && upstream_dedupe(&R, 0x1234, 65531), "in order");
	CHECK(!upstream_dedupe(&R, 0x1234, 65530) && R.c.rtp_duplicates == 1, "repeat passed");
	R.dd.switched = true;
	CHECK(!upstream_dedupe(&R, 0x1234, 65531), "repeat after the switch passed");
	CHECK(upstream_dedupe(&R, 0x1234, 3) && R.c.up_gap == 7, "gap %llu",
	      (unsigned long long)R.c.up_gap);
	CHECK(upstream_dedupe(&R, 0x1234, 1) && !upstream_dedupe(&R, 0x1234, 1), "late one");
	CHECK(upstream_dedupe(&R, 0x5678, 3), "another SSRC is another stream");
	R.up_cur = -1;
	R.nup = 0;
}

int main(void)
{
	R.rtp = true;
	R.max_per_source = 3;
	R.ctl_rate = 100;
	R.cookie_s = 10;
	R.expire_s = 30;
	R.data_fd[0] = R.data_fd[1] = 3;
	R.own_port[0] = 5004;
	R.own_port[1] = 5005;
	R.own_port[2] = 5006;
	R.rate = calloc(CTL_RATE_SLOTS, sizeof(*R.rate));
	if (!R.rate || subs_init(&R.subs, 64) || control_local_addrs(&R))
		return 2;
	memset(R.cookie_key, 7, sizeof(R.cookie_key));
	struct sockaddr_storage a = v4("198.51.100.7", 40000), b = v4("198.51.100.8", 40000);
	char m[128];

	/* a short JOIN: nothing; a padded one: a COOKIE shorter than it */
	CHECK(req(&a, "JOIN 6000") == 0, "short JOIN answered: %s", out);
	CHECK(R.c.ctl_short == 1, "ctl_short %llu", (unsigned long long)R.c.ctl_short);
	size_t n = req(&a, pad("JOIN 6000"));
	CHECK(n > 0 && n < CTL_JOIN_MIN && !strncmp(out, "COOKIE 6000 ", 12), "cookie reply '%s'", out);
	unsigned long long c = 0;
	sscanf(out, "COOKIE 6000 %llx", &c);
	/* another address, or another port, cannot use it */
	snprintf(m, sizeof(m), "JOIN 6000 cookie=%016llx", c);
	n = req(&b, m);
	CHECK(!strncmp(out, "ERR bad cookie", 14) && n <= strlen(m), "b used a's cookie: '%s'", out);
	snprintf(m, sizeof(m), "JOIN 6001 cookie=%016llx", c);
	CHECK(req(&a, m) && !strncmp(out, "ERR bad cookie", 14), "cookie of 6000 for 6001: '%s'", out);
	CHECK(R.subs.nactive == 0, "%u subscribers", R.subs.nactive);
	snprintf(m, sizeof(m), "JOIN 6000 cookie=%016llx", c);
	req(&a, m);
	CHECK(!strncmp(out, "OK JOIN 198.51.100.7 6000 ssrc=0x", 33), "JOIN with cookie: '%s'", out);
	CHECK(R.subs.nactive == 1, "%u subscribers", R.subs.nactive);
	struct sockaddr_storage d = v4("198.51.100.7", 6000);
	struct sub *s = subs_find(&R.subs, &d);
	CHECK(s && subs_by_ssrc(&R.subs, s->ssrc) == s, "SSRC index");

	/* KEEPALIVE and LEAVE need the cookie; errors to them are cut */
	n = req(&a, "KEEPALIVE 6000");
	CHECK(n <= strlen("KEEPALIVE 6000") && strncmp(out, "OK", 2),
	      "KEEPALIVE without cookie: '%s'", out);
	n = req(&b, "LEAVE 6000 cookie=0");
	CHECK(strncmp(out, "OK", 2) && R.subs.nactive == 1, "forged LEAVE: '%s'", out);
	/* the cookie expires after one to two lifetimes; the session's stays */
	fake_now += 25 * 1000000000ull;
	snprintf(m, sizeof(m), "JOIN 6002 cookie=%016llx", c);
	CHECK(req(&a, m) && !strncmp(out, "ERR bad cookie", 14), "expired cookie taken: '%s'", out);
	snprintf(m, sizeof(m), "KEEPALIVE 6000 cookie=%016llx", c);
	req(&a, m);
	CHECK(!strcmp(out, "OK KEEPALIVE 198.51.100.7 6000 expires=30\n"), "KEEPALIVE: '%s'", out);

	/* per source: 3 subscribers; a LEAVE frees a place */
	CHECK(join(&a, 6010) && join(&a, 6011), "second and third JOIN: '%s'", out);
	CHECK(!join(&a, 6012) && !strncmp(out, "ERR too many subscribers", 24), "fourth: '%s'", out);
	CHECK(subs_per_source(&R.subs, &a) == 3 && R.c.ctl_per_source == 1, "per source %u",
	      subs_per_source(&R.subs, &a));
	snprintf(m, sizeof(m), "LEAVE 6000 cookie=%016llx", c);
	req(&a, m);
	CHECK(!strcmp(out, "OK LEAVE 198.51.100.7 6000\n"), "LEAVE: '%s'", out);
	CHECK(join(&a, 6012) && subs_per_source(&R.subs, &a) == 3, "JOIN after LEAVE: '%s'", out);

	/* ssrc= is the subscriber's, not one the relay generated */
	CHECK(join(&b, 7000), "b: '%s'", out);
	struct sockaddr_storage bd = v4("198.51.100.8", 7000);
	struct sub *sb = subs_find(&R.subs, &bd);
	uint32_t gen = sb ? sb->ssrc : 0;
	req(&b, pad("JOIN 7000"));
	sscanf(out, "COOKIE 7000 %llx", &c);
	snprintf(m, sizeof(m), "JOIN 7000 ssrc=cafe cookie=%016llx", c);
	req(&b, m);
	CHECK(sb && sb->ssrc == 0xcafe && !subs_by_ssrc(&R.subs, 0xcafe) && !subs_by_ssrc(&R.subs, gen),
	      "ssrc= in the index: '%s'", out);

	/* refused addresses: the reply names why, nothing enters the table */
	struct {
		const char *from;
		uint16_t port;
		const char *msg, *why;
	} bad[] = {
		{ "198.51.100.9", 0, "JOIN 6000", NULL }, /* source port 0: no answer */
		{ "198.51.100.9", 1000, "JOIN 0", "port 0" },
		{ "0.0.0.0", 1000, "JOIN 6000", "not a unicast address" },
		{ "224.1.2.3", 1000, "JOIN 6000", "not a unicast address" },
		{ "255.255.255.255", 1000, "JOIN 6000", "not a unicast address" },
		{ "127.0.0.1", 1000, "JOIN 6000", "a local address" },
		{ "127.0.0.1", 5004, "JOIN 5004", NULL }, /* from our own socket: no answer */
	};
	uint32_t before = R.subs.nactive;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sockaddr_storage f = v4(bad[i].from, bad[i].port);
		req(&f, pad(bad[i].msg));
		if (bad[i].why)
			CHECK(strstr(out, bad[i].why) != NULL, "%s:%u '%s': '%s'", bad[i].from,
			      bad[i].port, bad[i].msg, out);
		else
			CHECK(out[0] == '\0', "%s:%u answered '%s'", bad[i].from, bad[i].port, out);
	}
	R.allow_local = true;
	struct sockaddr_storage lo = v4("127.0.0.1", 1000);
	req(&lo, pad("JOIN 5005"));
	CHECK(strstr(out, "one of the relay's own sockets"),
	      "own port with --allow-local-subscribers: '%s'", out);
	CHECK(join(&lo, 9000), "local subscriber with --allow-local-subscribers: '%s'", out);
	CHECK(R.subs.nactive == before + 1, "%u subscribers", R.subs.nactive);

	relays();

	/* the budget: 100 requests at once, then one per 10 ms */
	struct sockaddr_storage f = v4("203.0.113.1", 1000);
	uint64_t limited = R.c.ctl_rate_limited;
	for (int i = 0; i < 300; i++)
		req(&f, "PING");
	CHECK(R.c.ctl_rate_limited - limited == 200, "rate limited %llu of 300",
	      (unsigned long long)(R.c.ctl_rate_limited - limited));
	fake_now += 50 * 1000000ull;
	limited = R.c.ctl_rate_limited;
	for (int i = 0; i < 10; i++)
		req(&f, "PING");
	CHECK(R.c.ctl_rate_limited - limited == 5, "after 50 ms: %llu of 10 limited",
	      (unsigned long long)(R.c.ctl_rate_limited - limited));

	subs_free(&R.subs);
	free(R.rate);
	free(R.local);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
