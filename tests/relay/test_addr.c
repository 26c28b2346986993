/* SPDX-License-Identifier: MIT */
/*
 * Unit test of tools/addr.c, the address helpers that the relay and the CLI's
 * subcommands (blast, sink, ring-send) share: the ADDR:PORT split, strict
 * numeric literals, text, port and host comparison.
 */
#include "addr.h"
#include "check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static void split_ok(const char *in, const char *want_addr, const char *want_rest)
{
	char buf[64], *a = NULL, *r = NULL;
	enum addr_split_error why = 0;
	snprintf(buf, sizeof(buf), "%s", in);
	CHECK(addr_split(buf, &a, &r, &why) == 0, "'%s': refused (%d)", in, (int)why);
	CHECK(a && !strcmp(a, want_addr), "'%s': addr '%s' want '%s'", in, a ? a : "(null)", want_addr);
	CHECK(r && !strcmp(r, want_rest), "'%s': rest '%s' want '%s'", in, r ? r : "(null)", want_rest);
}

static void split_bad(const char *in, enum addr_split_error want)
{
	char buf[64], *a = NULL, *r = NULL;
	enum addr_split_error why = 0;
	snprintf(buf, sizeof(buf), "%s", in);
	CHECK(addr_split(buf, &a, &r, &why) == -1 && why == want, "'%s': why %d want %d", in,
	      (int)why, (int)want);
}

static void numeric(const char *in, int want_family, const char *want_text)
{
	struct sockaddr_storage ss;
	char t[80];
	int fam = addr_numeric(in, 4242, &ss);
	CHECK(fam == want_family, "'%s': family %d want %d", in, fam, want_family);
	if (fam > 0 && want_text) {
		CHECK(!strcmp(addr_str(&ss, t, sizeof(t)), want_text), "'%s': '%s' want '%s'", in,
		      t, want_text);
		CHECK(addr_port(&ss) == 4242, "'%s': port %u", in, addr_port(&ss));
		CHECK(addr_len(&ss) ==
			      (fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)),
		      "'%s': length", in);
	}
}

int main(void)
{
	split_ok("10.0.0.1:9", "10.0.0.1", "9");
	split_ok("[::1]:9", "::1", "9");
	split_ok("[fe80::1%lo]:7000+4", "fe80::1%lo", "7000+4");
	split_ok("host:", "host", "");
	split_bad("10.0.0.1", ADDR_SPLIT_NO_COLON);
	split_bad("::1:9", ADDR_SPLIT_BARE_IPV6);
	split_bad("[::1]9", ADDR_SPLIT_BRACKET);
	split_bad("[::1:9", ADDR_SPLIT_BRACKET);

	numeric("10.1.2.3", AF_INET, "10.1.2.3:4242");
	numeric("::1", AF_INET6, "[::1]:4242");
	numeric("[2001:db8::5]", AF_INET6, "[2001:db8::5]:4242");
	numeric("10.1", -1, NULL); /* inet_aton() shorthand: refused */
	numeric("300.1.2.3", -1, NULL);
	numeric("localhost", -1, NULL); /* no name look-ups */
	numeric("", -1, NULL);
	numeric("[]", -1, NULL);

	struct sockaddr_storage a, b;
	CHECK(addr_numeric("10.0.0.1", 1, &a) == AF_INET && addr_numeric("10.0.0.1", 2, &b) == AF_INET,
	      "parse");
	CHECK(addr_same_host(&a, &b), "same host, other port");
	addr_set_port(&b, 1);
	CHECK(addr_port(&b) == 1 && !memcmp(&a, &b, sizeof(a)), "addr_set_port");
	CHECK(addr_numeric("10.0.0.2", 1, &b) == AF_INET && !addr_same_host(&a, &b), "other host");
	CHECK(addr_numeric("::ffff:10.0.0.1", 1, &b) == AF_INET6 && !addr_same_host(&a, &b),
	      "a v4-mapped IPv6 address is another family");
	CHECK(addr_numeric("fe80::1", 1, &a) == AF_INET6 &&
		      addr_numeric("fe80::1", 9, &b) == AF_INET6 && addr_same_host(&a, &b),
	      "IPv6 same host");
	a.ss_family = AF_UNIX;
	char t[32];
	CHECK(addr_port(&a) == 0 && !strcmp(addr_str(&a, t, sizeof(t)), "(family 1)"),
	      "other family: '%s'", t);

	if (failures)
		fprintf(stderr, "test_addr: %d failures\n", failures);
	return failures ? 1 : 0;
}
