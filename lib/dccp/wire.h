/* SPDX-License-Identifier: MIT */
/*
 * DCCP wire format, library-internal (RFC 4340 §5, §7, §9; RFC 5596 §2.2.1;
 * RFC 6773 §3.3).  Pure functions: no sockets, no clocks, no allocation.
 *
 *   wire.c     generic header and type-specific fields, checksums,
 *              sequence arithmetic, validity windows
 *   options.c  options (options.h)
 *   feature.c  feature negotiation values (feature.h)
 *   tfrc.c     TFRC equations for CCID 3 (tfrc.h)
 *
 * Every rejected input is counted under a reason (enum dccp_drop) in a
 * struct dccp_counters the caller passes (NULL: not counted).  These are
 * drop reasons, not errors: a packet, option or feature value the peer got
 * wrong is dropped or ignored and counted, and nothing fails.  Errors inside
 * the library are negative errno values (lib/core/core.h).
 */
#ifndef GC_DCCP_WIRE_H
#define GC_DCCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DCCP_SEQ_BITS 48
#define DCCP_SEQ_MASK ((UINT64_C(1) << 48) - 1)
#define DCCP_IPPROTO 33	   /* IANA protocol number */
#define DCCP_UDP_PORT 6511 /* RFC 6773 §3.8: default DCCP-UDP listening port */
#define DCCP_MAX_HDR 1020  /* Data Offset is 8 bits of 32-bit words */

enum dccp_type {
	DCCP_REQUEST = 0,
	DCCP_RESPONSE = 1,
	DCCP_DATA = 2,
	DCCP_ACK = 3,
	DCCP_DATAACK = 4,
	DCCP_CLOSEREQ = 5,
	DCCP_CLOSE = 6,
	DCCP_RESET = 7,
	DCCP_SYNC = 8,
	DCCP_SYNCACK = 9,
	DCCP_LISTEN = 10, /* RFC 5596 */
	DCCP_TYPE_COUNT
};

/* RFC 4340 §5.6 Table 2 (and RFC 6773 §7.2 for 12). */
enum dccp_reset_code {
	DCCP_RESET_UNSPECIFIED = 0,
	DCCP_RESET_CLOSED = 1,
	DCCP_RESET_ABORTED = 2,
	DCCP_RESET_NO_CONNECTION = 3,
	DCCP_RESET_PACKET_ERROR = 4,
	DCCP_RESET_OPTION_ERROR = 5,
	DCCP_RESET_MANDATORY_ERROR = 6,
	DCCP_RESET_CONNECTION_REFUSED = 7,
	DCCP_RESET_BAD_SERVICE_CODE = 8,
	DCCP_RESET_TOO_BUSY = 9,
	DCCP_RESET_BAD_INIT_COOKIE = 10,
	DCCP_RESET_AGGRESSION_PENALTY = 11,
	DCCP_RESET_ENCAP_PORT_REUSE = 12,
};

/* Why an input was dropped (a packet) or ignored (an option or feature
 * value); DCCP_OK: taken.  A drop reason, counted, never an error code. */
enum dccp_drop {
	DCCP_OK = 0,
	/* packet (RFC 4340 §8.5 step 1, §9) */
	DCCP_DROP_SHORT,	 /* shorter than the generic header */
	DCCP_DROP_TYPE_RESERVED, /* Type 11-15 */
	DCCP_DROP_SHORT_SEQNO,	 /* X=0 on a type that must use 48-bit numbers */
	DCCP_DROP_DOFF_SMALL,	 /* Data Offset below the type's fixed header */
	DCCP_DROP_DOFF_LARGE,	 /* Data Offset past the end of the packet */
	DCCP_DROP_CSCOV,	 /* (CsCov-1)*4 larger than the application data */
	DCCP_DROP_CHECKSUM,	 /* header checksum wrong */
	DCCP_DROP_UDP,		 /* RFC 6773 §3.3: bad UDP length or checksum */
	/* options (RFC 4340 §5.8) */
	DCCP_DROP_OPT_LEN,	 /* length byte < 2 or past the options area */
	DCCP_DROP_OPT_SIZE,	 /* wrong length for the option's type */
	DCCP_DROP_OPT_VALUE,	 /* invalid value (reserved state, skip > 3, ...) */
	DCCP_DROP_OPT_MANDATORY, /* Mandatory last, or Mandatory Mandatory */
	DCCP_DROP_OPT_ON_DATA,	 /* option not allowed on DCCP-Data (ignored) */
	DCCP_DROP_OPT_NO_ACKNO,	 /* needs an Acknowledgement Number (ignored) */
	DCCP_DROP_OPT_EARLY,	 /* Ack Vector/Init Cookie in the wrong state (ignored) */
	DCCP_DROP_OPT_UNKNOWN,	 /* type not understood (ignored) */
	DCCP_DROP_OPT_TOO_MANY,	 /* more options than the parser keeps */
	/* feature negotiation (RFC 4340 §6.6.8) */
	DCCP_DROP_FEAT_UNKNOWN, /* feature number not understood */
	DCCP_DROP_FEAT_INVALID, /* invalid length, value or option for the feature */
	DCCP_DROP_COUNT
};

struct dccp_counters {
	uint64_t n[DCCP_DROP_COUNT];
};

const char *dccp_drop_name(enum dccp_drop e);
const char *dccp_type_name(unsigned type);

/* Count e in c (c may be NULL); returns e. */
static inline enum dccp_drop dccp_count(struct dccp_counters *c, enum dccp_drop e)
{
	if (c && e > DCCP_OK && e < DCCP_DROP_COUNT)
		c->n[e]++;
	return e;
}

/* ---- header ------------------------------------------------------------ */

struct dccp_hdr {
	uint16_t sport, dport;
	uint8_t doff;			   /* Data Offset, 32-bit words (set by dccp_build) */
	uint8_t ccval;			   /* 4 bits */
	uint8_t cscov;			   /* 4 bits */
	uint16_t csum;			   /* as received */
	uint8_t type;			   /* enum dccp_type */
	bool x;				   /* 48-bit sequence numbers */
	uint64_t seq;			   /* 48 bits (24 if !x: extend with dccp_seq_extend()) */
	bool has_ack;			   /* types with an Acknowledgement Number subheader */
	uint64_t ack;			   /* 48 bits (24 if !x) */
	uint32_t service;		   /* Request, Response, Listen */
	uint8_t reset_code, reset_data[3]; /* Reset */
	/* where things are in the parsed packet (set by dccp_parse) */
	uint16_t fixed_len; /* generic header + type-specific fields */
	uint16_t opt_off, opt_len;
	uint32_t data_off, data_len;
};

/* Length of the generic header plus type-specific fields (0: reserved type). */
size_t dccp_fixed_len(unsigned type, bool x);
/* Types that may use 24-bit sequence numbers (RFC 4340 §5.1: Data, Ack, DataAck). */
bool dccp_type_short_ok(unsigned type);
/* Types carrying an Acknowledgement Number subheader. */
bool dccp_type_has_ack(unsigned type);

/*
 * The network-layer pseudo-header (RFC 4340 §9.1).  family is AF_INET or
 * AF_INET6; addresses in network order (4 or 16 bytes used).
 */
struct dccp_pseudo {
	int family;
	uint8_t src[16], dst[16];
};

/*
 * Parse the packet p[0..len) into h: RFC 4340 §8.5 step 1 (length, Type,
 * Data Offset, X for the type, CsCov) and, if ph is not NULL, the header
 * checksum over ph.  Pass ph == NULL for DCCP-UDP, whose DCCP checksum is
 * ignored on receipt (RFC 6773 §3.3; check the UDP checksum with
 * dccp_udp_check() instead).  Returns DCCP_OK or the counted reason.
 */
enum dccp_drop dccp_parse(const uint8_t *p, size_t len, const struct dccp_pseudo *ph,
			  struct dccp_hdr *h, struct dccp_counters *c);

/*
 * Build a packet into buf[0..cap): h's ports, ccval, cscov, type, x, seq,
 * ack, service and reset fields; opts[0..optlen) (optlen a multiple of 4:
 * see dccp_obuf_pad()), then data[0..dlen).  With ph, the checksum is
 * computed over ph; with ph == NULL (DCCP-UDP, RFC 6773 §3.3) it is 0.
 * Returns the packet length, or -EINVAL (field out of range, X=0 on a type
 * that needs X=1, CsCov past the data) or -EMSGSIZE (does not fit).
 */
ssize_t dccp_build(uint8_t *buf, size_t cap, const struct dccp_hdr *h, const uint8_t *opts,
		   size_t optlen, const void *data, size_t dlen, const struct dccp_pseudo *ph);

/* Number of bytes the checksum covers for CsCov over a packet (RFC 4340 §9.2);
 * 0 if CsCov is invalid for it. */
size_t dccp_csum_cov(uint8_t cscov, size_t hdr_len, size_t pkt_len);

/* The checksum field's value for p[0..len) (checksum field taken as 0), over
 * the first cov bytes: cov must come from dccp_csum_cov() and be non-zero. */
uint16_t dccp_csum(const uint8_t *p, size_t len, size_t cov, const struct dccp_pseudo *ph);

/* RFC 1071 one's complement sum of p[0..len), added to sum (not folded). */
uint32_t dccp_csum_add(uint32_t sum, const void *p, size_t len);
uint16_t dccp_csum_fold(uint32_t sum);

/*
 * DCCP-UDP (RFC 6773 §3.3, read in the RFC's text): "For DCCP-UDP, the
 * function of the DCCP Checksum field is performed by the UDP Checksum
 * field.  On transmission, the DCCP Checksum field SHOULD be set to zero.
 * On receipt, the DCCP Checksum field MUST be ignored."  So the only
 * checksum is UDP's own (RFC 768, RFC 2460 §8.1): its pseudo-header is the
 * IPv4 source and destination, a zero byte, protocol 17 and the 16-bit UDP
 * Length (IPv6: source, destination, the UDP Length as 32 bits, three zero
 * bytes, Next Header 17), and it covers the UDP header and the whole DCCP
 * packet; CsCov is carried but gives no partial coverage (§3.3.1).  Neither
 * the DCCP protocol number 33 nor the DCCP length enters any checksum.
 * (tshark's DCCP dissector, handed a DCCP-UDP payload, checks it as native
 * DCCP instead: see tests/e2e/test_dccp_wire.py.)
 *
 * dccp_udp_wrap() writes the 8-byte UDP header in front of a DCCP packet
 * already at udp + 8 (dlen bytes) with that checksum (a computed 0 is sent
 * as 0xffff); dccp_udp_check() applies the receive rules: UDP Length >= 20
 * and <= len, checksum non-zero and correct.  It returns the DCCP packet's
 * length (UDP Length - 8), or -1 after counting DCCP_DROP_UDP.  Then parse the
 * DCCP packet with dccp_parse(..., ph = NULL, ...).
 */
void dccp_udp_wrap(uint8_t *udp, uint16_t sport, uint16_t dport, size_t dlen,
		   const struct dccp_pseudo *ph);
ssize_t dccp_udp_check(const uint8_t *udp, size_t len, const struct dccp_pseudo *ph,
		       struct dccp_counters *c);

/* ---- sequence numbers (RFC 4340 §7) ------------------------------------ */

static inline uint64_t dccp_seq_add(uint64_t a, int64_t d)
{
	return (a + (uint64_t)d) & DCCP_SEQ_MASK;
}
/* a - b mod 2^48, in [0, 2^48) */
static inline uint64_t dccp_seq_sub(uint64_t a, uint64_t b)
{
	return (a - b) & DCCP_SEQ_MASK;
}
/* signed distance from b to a, in [-2^47, 2^47) */
static inline int64_t dccp_seq_delta(uint64_t a, uint64_t b)
{
	uint64_t d = dccp_seq_sub(a, b);
	return d >= (UINT64_C(1) << 47) ? (int64_t)d - (INT64_C(1) << 48) : (int64_t)d;
}
/* circular comparisons (RFC 4340 §3.1) */
static inline bool dccp_seq_before(uint64_t a, uint64_t b)
{
	return dccp_seq_delta(a, b) < 0;
}
static inline bool dccp_seq_after(uint64_t a, uint64_t b)
{
	return dccp_seq_delta(a, b) > 0;
}
/* lo <= x <= hi, walking up from lo */
static inline bool dccp_seq_between(uint64_t x, uint64_t lo, uint64_t hi)
{
	return dccp_seq_sub(x, lo) <= dccp_seq_sub(hi, lo);
}
/* Extend a 24-bit number s to 48 bits near ref (RFC 4340 §7.6). */
uint64_t dccp_seq_extend(uint32_t s, uint64_t ref);

/*
 * What one endpoint knows of its sequence space (RFC 4340 §7.1).  w_rx is
 * Sequence Window/B (the peer's feature: width of the window for the peer's
 * Sequence Numbers), w_tx is Sequence Window/A (ours: width of the window
 * for Acknowledgement Numbers).  initial is set while the windows may still
 * reach back before ISR/ISS; the §7.5.1 clamps apply only then, because
 * long-lived connections wrap and would seem to be before ISR/ISS.
 */
struct dccp_seqstate {
	uint64_t isr, iss, gsr, gss, gar;
	uint64_t w_rx, w_tx;
	bool initial;
};

struct dccp_windows {
	uint64_t swl, swh, awl, awh;
};

/* The windows of RFC 4340 §7.5.1. */
struct dccp_windows dccp_windows(const struct dccp_seqstate *s);

enum dccp_seqcheck {
	DCCP_SEQCHK_NORMAL, /* §7.5.3 first table */
	DCCP_SEQCHK_ACTIVE, /* connection active (valid packet within 3 RTTs): strict Sync/SyncAck */
	DCCP_SEQCHK_STRICT, /* ACTIVE, plus the experimental seqno == GSR + 1 for CloseReq/Close/Reset */
};

enum dccp_seqvalid {
	DCCP_SEQ_VALID,
	DCCP_SEQ_BAD_SEQNO,
	DCCP_SEQ_BAD_ACKNO,
};

/*
 * Sequence-validity of a received packet (RFC 4340 §7.5.3).  listen_or_request:
 * the connection is in LISTEN or REQUEST, where Request/Response Sequence
 * Numbers are not checked.  Listen packets carry no meaningful numbers
 * (RFC 5596 §2.2.1) and are always "valid" here; the state machine decides.
 */
enum dccp_seqvalid dccp_seq_valid(const struct dccp_seqstate *s, const struct dccp_hdr *h,
				  enum dccp_seqcheck mode, bool listen_or_request);

/*
 * What to do with a sequence-invalid packet (RFC 4340 §7.5.4): returns true
 * if a DCCP-Sync must be sent, with its Acknowledgement Number in *ack (GSR
 * for a Reset, the packet's Sequence Number otherwise); false means ignore
 * (Sync, SyncAck).  Syncs sent this way are rate limited with dccp_sync_allow().
 */
bool dccp_invalid_response(const struct dccp_seqstate *s, const struct dccp_hdr *h, uint64_t *ack);

/* At most DCCP_SYNC_RATE Syncs in any one second (a sliding window, not
 * fixed ones, which would let 2 x DCCP_SYNC_RATE through around a window's
 * edge) in reply to invalid packets (§7.5.4). */
#define DCCP_SYNC_RATE 8
struct dccp_sync_limit {
	uint64_t sent_ns[DCCP_SYNC_RATE]; /* when the last ones went, a ring */
	unsigned next, n;
};
bool dccp_sync_allow(struct dccp_sync_limit *l, uint64_t now_ns);

#endif /* GC_DCCP_WIRE_H */
