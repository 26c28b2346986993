/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the relay's samplicator-syntax parser (tools/relay/config.c):
 * receivers, config lines, whole files, source matching, and that every bad
 * input is refused with a message naming file:line and what was expected.
 */
#include "relay.h"
#include "check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct rc_opts NUM = { .family = AF_UNSPEC, .flags = RCV_CHECKSUM, .numeric = true };

static struct sockaddr_storage v4(const char *a, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s = (struct sockaddr_in *)&ss;
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, a, &s->sin_addr);
	return ss;
}

static struct sockaddr_storage v6(const char *a, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	inet_pton(AF_INET6, a, &s->sin6_addr);
	return ss;
}

/* One receiver argument: expect ok, and count/port/freq/ttl of the first. */
static void rcv_ok(const char *arg, size_t n, int fam, uint16_t port, uint32_t freq, uint8_t ttl)
{
	struct rc_conf c = { 0 };
	char err[256] = "";
	struct source *s = rc_add_source(&c, "<test>", 0);
	int rc = rc_parse_receiver(&c, s, arg, &NUM, err, sizeof(err));
	CHECK(rc == 0, "'%s': %s", arg, err);
	if (rc == 0) {
		CHECK(s->n == n, "'%s': %zu receivers, want %zu", arg, s->n, n);
		CHECK(s->rcv[0].addr.ss_family == fam, "'%s': family", arg);
		CHECK(addr_port(&s->rcv[0].addr) == port, "'%s': port %u want %u", arg,
		      addr_port(&s->rcv[0].addr), port);
		CHECK(addr_port(&s->rcv[n - 1].addr) == port + n - 1, "'%s': last port", arg);
		CHECK(s->rcv[0].freq == freq, "'%s': interval %u want %u", arg, s->rcv[0].freq, freq);
		CHECK(s->rcv[0].ttl == ttl, "'%s': ttl %u want %u", arg, s->rcv[0].ttl, ttl);
		CHECK(c.receivers == n, "'%s': conf count", arg);
	}
	rc_free(&c);
}

static void rcv_bad(const char *arg, const char *want)
{
	struct rc_conf c = { 0 };
	char err[256] = "";
	struct source *s = rc_add_source(&c, "<test>", 0);
	int rc = rc_parse_receiver(&c, s, arg, &NUM, err, sizeof(err));
	CHECK(rc == -1, "'%s' accepted", arg);
	CHECK(strstr(err, want) != NULL, "'%s': message '%s' lacks '%s'", arg, err, want);
	CHECK(strstr(err, "expected") != NULL || strstr(err, "more than") != NULL ||
		      strstr(err, "-4") || strstr(err, "-6"),
	      "'%s': message '%s' does not say what was expected", arg, err);
	rc_free(&c);
}

static void file_bad_n(const char *text, size_t len, const char *want)
{
	struct rc_conf c = { 0 };
	char err[512] = "";
	int rc = rc_parse_buffer(&c, "relay.conf", text, len, &NUM, err, sizeof(err));
	CHECK(rc == -1, "file accepted: %s", text);
	CHECK(strstr(err, want) != NULL, "message '%s' lacks '%s'", err, want);
	rc_free(&c);
}

static void file_bad(const char *text, const char *want)
{
	file_bad_n(text, strlen(text), want);
}

int main(void)
{
	/* receivers: samplicator's forms */
	rcv_ok("10.1.2.3", 1, AF_INET, 2000, 1, 64);
	rcv_ok("10.1.2.3/9995", 1, AF_INET, 9995, 1, 64);
	rcv_ok("10.1.2.3/9995/10", 1, AF_INET, 9995, 10, 64);
	rcv_ok("10.1.2.3/9995/10,3", 1, AF_INET, 9995, 10, 3);
	rcv_ok("10.1.2.3/9995/,255", 1, AF_INET, 9995, 1, 255);
	rcv_ok("10.1.2.3/7000-7010", 11, AF_INET, 7000, 1, 64);
	rcv_ok("10.1.2.3/7000+10/4", 10, AF_INET, 7000, 4, 64);
	rcv_ok("[fd00::1]/2055", 1, AF_INET6, 2055, 1, 64);
	rcv_ok("[fd00::1]", 1, AF_INET6, 2000, 1, 64);
	rcv_ok("fd00::1/2055", 1, AF_INET6, 2055, 1, 64);
	rcv_ok("  10.1.2.3/5  ", 1, AF_INET, 5, 1, 64);
	rcv_ok("10.1.2.3/65535", 1, AF_INET, 65535, 1, 64);
	rcv_ok("10.1.2.3/1+65535", 65535, AF_INET, 1, 1, 64);

	rcv_bad("", "empty address");
	rcv_bad("10.1.2.3/", "empty port");
	rcv_bad("10.1.2.3/0", "out of range");
	rcv_bad("10.1.2.3/65536", "out of range");
	rcv_bad("10.1.2.3/99999999999", "out of range");
	rcv_bad("10.1.2.3/2000/0", "bad interval");
	rcv_bad("10.1.2.3/2000/-1", "bad interval");
	rcv_bad("10.1.2.3/2000/x", "bad interval");
	rcv_bad("10.1.2.3/2000/1,0", "bad TTL");
	rcv_bad("10.1.2.3/2000/1,256", "bad TTL");
	rcv_bad("10.1.2.3/2000/1,", "bad TTL");
	rcv_bad("10.1.2.3/2000,5", "TTL needs the interval");
	rcv_bad("10.1.2.3/10-5", "bad port range");
	rcv_bad("10.1.2.3/65000+1000", "bad port range");
	rcv_bad("10.1.2.3/1-2+3", "bad port");
	rcv_bad("10.1.2.3/netflow", "bad port"); /* numeric mode: no service names */
	rcv_bad("10.1.2.3:2000", "':' is not a port separator");
	rcv_bad("[fd00::1", "missing ']'");
	rcv_bad("[fd00::1]x", "after ']'");
	rcv_bad("300.1.2.3/2000", "not an IPv4 or IPv6 address");
	rcv_bad("host.example/2000", "not an IPv4 or IPv6 address");
	{
		struct rc_opts o4 = NUM;
		o4.family = AF_INET;
		struct rc_conf c = { 0 };
		char err[256] = "";
		struct source *s = rc_add_source(&c, "<test>", 0);
		CHECK(rc_parse_receiver(&c, s, "[fd00::1]/5", &o4, err, sizeof(err)) == -1,
		      "-4 took IPv6");
		CHECK(strstr(err, "-4") != NULL, "message: %s", err);
		rc_free(&c);
	}
	{ /* the overall receiver cap */
		struct rc_opts small = NUM;
		small.max_receivers = 10;
		struct rc_conf c = { 0 };
		char err[256] = "";
		struct source *s = rc_add_source(&c, "<test>", 0);
		CHECK(rc_parse_receiver(&c, s, "10.0.0.1/1+10", &small, err, sizeof(err)) == 0,
		      "%s", err);
		CHECK(rc_parse_receiver(&c, s, "10.0.0.1/20", &small, err, sizeof(err)) == -1,
		      "cap not enforced");
		CHECK(strstr(err, "more than 10 receivers") != NULL, "message: %s", err);
		rc_free(&c);
	}

	/* a whole file */
	const char *good = "# NetFlow from the core routers\n"
			   "\n"
			   "10.1.0.0/255.255.0.0: 10.9.0.1/2055 10.9.0.2/2055/10   # two collectors\n"
			   "10.2.3.4/16:10.9.0.3/9995/1,5\r\n"
			   "[fd00:1::]/32: [fd00:9::1]/2055\n"
			   "10.3.0.1: 10.9.0.4\n"
			   "0.0.0.0/0: 10.9.0.5/1000+3\n"
			   "10.4.0.0/8:\n"
			   "   \t  \n";
	struct rc_conf c = { 0 };
	char err[512] = "";
	int rc = rc_parse_buffer(&c, "relay.conf", good, strlen(good), &NUM, err, sizeof(err));
	CHECK(rc == 0, "good file: %s", err);
	CHECK(c.n == 6, "%zu sources", c.n);
	CHECK(c.receivers == 8, "%zu receivers", c.receivers);
	if (c.n == 6) {
		CHECK(c.src[0].line == 3 && !strcmp(c.src[0].file, "relay.conf"), "line numbers");
		CHECK(c.src[0].rcv[1].freq == 10, "interval");
		CHECK(c.src[1].rcv[0].ttl == 5, "ttl with CRLF");
		struct sockaddr_storage a = v4("10.1.77.1", 1), b = v4("10.2.99.1", 1),
					d = v4("10.3.0.1", 1), e = v4("10.3.0.2", 1),
					x = v6("fd00:1:ff::7", 1), y = v6("fd00:2::1", 1);
		CHECK(rc_match(&c.src[0], &a) && !rc_match(&c.src[0], &b), "dotted mask");
		CHECK(rc_match(&c.src[1], &b) && !rc_match(&c.src[1], &a),
		      "host bits in '10.2.3.4/16' are masked (samplicator would match nothing)");
		CHECK(rc_match(&c.src[2], &x) && !rc_match(&c.src[2], &y) && !rc_match(&c.src[2], &a),
		      "IPv6 prefix, all 16 bytes");
		CHECK(rc_match(&c.src[3], &d) && !rc_match(&c.src[3], &e), "default mask /32");
		CHECK(rc_match(&c.src[4], &a) && rc_match(&c.src[4], &x),
		      "0.0.0.0 matches all, as in samplicator");
		CHECK(c.src[5].n == 0, "a source with no receivers");
	}
	rc_free(&c);

	file_bad("10.0.0.1 10.9.0.1/2055\n", "relay.conf:1: missing ':'");
	file_bad("# ok\n10.0.0.1: 10.9.0.1/2055\n10.0.0.2: 10.9.0.1/0\n",
		 "relay.conf:3: receiver '10.9.0.1/0': port 0 is out of range: expected 1..65535");
	file_bad("10.0.0.0/33: 10.9.0.1\n", "relay.conf:1: source: bad mask '33'");
	file_bad("10.0.0.0/255.0.0.x: 10.9.0.1\n", "relay.conf:1: source: bad mask");
	file_bad("[fd00::]/129: [fd00::1]\n", "relay.conf:1: source: bad mask '129'");
	file_bad("[fd00::/64: [fd00::1]\n", "relay.conf:1:");
	file_bad("\n\n\n10.0.0.1: 10.9.0.1/2000/1,300\n",
		 "relay.conf:4: receiver '10.9.0.1/2000/1,300': bad TTL");
	file_bad_n("10.0.0.1: 10.9.0.1\0junk\n", 25, "relay.conf:1: NUL byte");
	file_bad("nonsense: 10.9.0.1\n",
		 "relay.conf:1: source: 'nonsense' is not an IPv4 or IPv6 address");
	{
		size_t n = RELAY_MAX_LINE + 10;
		char *big = malloc(n + 1);
		memset(big, 'x', n);
		big[n] = '\0';
		file_bad(big, "relay.conf:1: line longer than");
		free(big);
	}
	{ /* a missing file names the path */
		struct rc_conf m = { 0 };
		char e2[256] = "";
		CHECK(rc_parse_file(&m, "/nonexistent/relay.conf", &NUM, e2, sizeof(e2)) == -1,
		      "missing file");
		CHECK(strstr(e2, "/nonexistent/relay.conf: cannot open") != NULL, "message: %s", e2);
		rc_free(&m);
	}
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("relay config parser: all checks passed\n");
	return 0;
}
