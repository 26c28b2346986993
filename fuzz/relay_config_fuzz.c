/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the relay's config parser (tools/relay/config.c).  The
 * input is a config file; its first byte also picks -4/-6 and whether it is
 * parsed as one command-line receiver instead.  Numeric mode: no lookups.
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target relay_config_fuzz
 *   build-fuzz/fuzz/relay_config_fuzz -max_total_time=60 fuzz/corpus/relay_config
 */
#include "relay.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	struct rc_opts o = { .numeric = true, .flags = RCV_CHECKSUM, .max_receivers = 4096 };
	uint8_t mode = data[0];
	o.family = (mode & 3) == 1 ? AF_INET : (mode & 3) == 2 ? AF_INET6 : AF_UNSPEC;
	data++;
	size--;
	struct rc_conf c = { 0 };
	char err[512];
	if (mode & 4) {
		char *arg = malloc(size + 1);
		if (!arg)
			return 0;
		memcpy(arg, data, size);
		arg[size] = '\0';
		struct source *s = rc_add_source(&c, "<command line>", 0);
		if (s)
			(void)rc_parse_receiver(&c, s, arg, &o, err, sizeof(err));
		free(arg);
	} else {
		(void)rc_parse_buffer(&c, "fuzz.conf", (const char *)data, size, &o, err, sizeof(err));
	}
	/* whatever was accepted must be usable */
	struct sockaddr_storage probe = { .ss_family = AF_INET };
	for (size_t i = 0; i < c.n; i++) {
		(void)rc_match(&c.src[i], &probe);
		for (size_t k = 0; k < c.src[i].n; k++) {
			const struct receiver *r = &c.src[i].rcv[k];
			if (addr_port(&r->addr) == 0 || r->freq == 0 || r->ttl == 0)
				abort();
		}
	}
	rc_free(&c);
	return 0;
}
