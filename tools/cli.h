/* SPDX-License-Identifier: MIT */
/*
 * tools/cli.h - shared helpers of the groupcast command line tool.
 *
 * Exit codes: 0 done, 1 runtime failure, 2 bad arguments.
 */
#ifndef GROUPCAST_TOOLS_CLI_H
#define GROUPCAST_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <groupcast/group.h> /* GC_UDP4_MAX, GC_UDP6_MAX */

#include "addr.h"

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/*
 * Payload written by `blast` and checked by `sink --verify`:
 *   size >= 16: "GCB1" | u32 engine-rep index (LE) | u64 sequence (LE) | pattern
 *   size <  16: pattern only
 * Pattern byte at offset i of the shared payload is cli_pattern(i).
 * With --prepend/--append, recipient with port p gets cli_member_byte(p, j, salt)
 * at byte j of its prepend (salt CLI_SALT_PRE) and append (CLI_SALT_APP).
 */
#define CLI_MAGIC "GCB1"
#define CLI_HDR_LEN 16u
#define CLI_SALT_PRE 0x50u
#define CLI_SALT_APP 0xA0u

static inline uint8_t cli_pattern(size_t i)
{
	return (uint8_t)(i * 7u + 0x5au);
}

static inline uint8_t cli_member_byte(uint16_t port, size_t j, unsigned salt)
{
	uint32_t h = (uint32_t)port * 2654435761u + salt * 97u;
	return (uint8_t)((h >> ((j & 3u) * 8u)) + (uint8_t)j);
}

/* Name used in messages, e.g. "groupcast sink". */
extern const char *cli_cmd;

/* Message "<cli_cmd>: <msg>", a hint to --help, exit 2. */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Message "<cli_cmd>: <msg>", exit 1. */
void cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Report a getopt_long() error (ch is '?' or ':') for argv, exit 2. */
void cli_getopt_error(int ch, char **argv) __attribute__((noreturn));

/* Unsigned integer in [min, max] for option opt, or exit 2. */
uint64_t cli_u64(const char *opt, const char *s, uint64_t min, uint64_t max);
/* --log-level's argument (log.h's levels), or exit 2. */
int cli_log_level(const char *s);
/* CPU number for option opt ("none" or -1: do not pin), or exit 2. */
int cli_cpu(const char *opt, const char *s);

/* Numeric IPv4 or IPv6 literal (IPv6 may carry %scope) with port into *ss;
 * returns the family, or exits 2 naming opt. */
int cli_ip(const char *opt, const char *s, uint16_t port, struct sockaddr_storage *ss);
/* A numeric IPv4 address (LMS and LTP are IPv4 only), or exit 2 naming opt. */
struct in_addr cli_ip4(const char *opt, const char *s);

/* Split "ADDR:REST" or "[IPv6]:REST" in buf (modified in place): *addr
 * and *rest point into buf.  form names the expected shape in errors
 * ("ADDR:PORT"); exit 2 naming opt and s (the original text). */
void cli_split_addr(const char *opt, const char *s, char *buf, const char *form, char **addr,
		    char **rest);

/* Pin the calling thread to cpu (no-op if cpu < 0); exit 2 naming opt. */
void cli_pin(const char *opt, int cpu);
/* Raise RLIMIT_NOFILE so that at least need descriptors fit. */
void cli_raise_nofile(size_t need);
/* Set SO_SNDBUF/SO_RCVBUF (forced if allowed); returns the value the kernel reports. */
int cli_sockbuf(int fd, bool rcv, int bytes);

uint64_t cli_now(clockid_t clk);
/* JSON string (with quotes) of s, or null. */
void cli_json_str(FILE *f, const char *s);

int cmd_sink(int argc, char **argv);
int cmd_blast(int argc, char **argv);
int cmd_relay(int argc, char **argv);
int cmd_engine(int argc, char **argv);
int cmd_ringsend(int argc, char **argv);
int cmd_lms(int argc, char **argv);
int cmd_ltp(int argc, char **argv);
int cmd_dccp(int argc, char **argv);

static inline void cli_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void cli_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t cli_get_le32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}
static inline uint64_t cli_get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#endif /* GROUPCAST_TOOLS_CLI_H */
