/* SPDX-License-Identifier: MIT */
/*
 * DCCP packets on the wire:
 *   RFC 4340 §5.1-5.7  generic header, Acknowledgement Number subheader and
 *                      the type-specific fields of every packet type
 *   RFC 5596 §2.2.1    DCCP-Listen (Type 10)
 *   RFC 4340 §8.5      step 1: which malformed packets are dropped
 *   RFC 4340 §9.1-9.2  header checksum over the IPv4/IPv6 pseudo-header, CsCov
 *   RFC 6773 §3.3      DCCP-UDP: the UDP checksum replaces the DCCP checksum
 *   RFC 4340 §7        sequence arithmetic mod 2^48, 24-bit extension (§7.6),
 *                      validity windows (§7.5.1), validity rules (§7.5.3),
 *                      answers to invalid packets (§7.5.4)
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "dccp/wire.h"

static const char *const drop_names[DCCP_DROP_COUNT] = {
	[DCCP_OK] = "ok",
	[DCCP_DROP_SHORT] = "packet shorter than the generic header",
	[DCCP_DROP_TYPE_RESERVED] = "reserved packet type",
	[DCCP_DROP_SHORT_SEQNO] = "short sequence number on a type that needs X=1",
	[DCCP_DROP_DOFF_SMALL] = "Data Offset smaller than the type's header",
	[DCCP_DROP_DOFF_LARGE] = "Data Offset past the end of the packet",
	[DCCP_DROP_CSCOV] = "CsCov larger than the application data",
	[DCCP_DROP_CHECKSUM] = "bad header checksum",
	[DCCP_DROP_UDP] = "bad DCCP-UDP length or checksum",
	[DCCP_DROP_OPT_LEN] = "option length < 2 or past the options area",
	[DCCP_DROP_OPT_SIZE] = "wrong length for the option type",
	[DCCP_DROP_OPT_VALUE] = "invalid option value",
	[DCCP_DROP_OPT_MANDATORY] = "Mandatory with no option after it, or before Mandatory",
	[DCCP_DROP_OPT_ON_DATA] = "option not allowed on DCCP-Data",
	[DCCP_DROP_OPT_NO_ACKNO] = "option needs an Acknowledgement Number",
	[DCCP_DROP_OPT_EARLY] = "option not allowed in this connection state",
	[DCCP_DROP_OPT_UNKNOWN] = "unknown option",
	[DCCP_DROP_OPT_TOO_MANY] = "too many options",
	[DCCP_DROP_FEAT_UNKNOWN] = "unknown feature",
	[DCCP_DROP_FEAT_INVALID] = "invalid feature option",
};

const char *dccp_drop_name(enum dccp_drop e)
{
	return e >= 0 && e < DCCP_DROP_COUNT ? drop_names[e] : "?";
}

const char *dccp_type_name(unsigned type)
{
	static const char *const names[DCCP_TYPE_COUNT] = {
		"Request", "Response", "Data", "Ack",	  "DataAck", "CloseReq",
		"Close",   "Reset",    "Sync", "SyncAck", "Listen",
	};
	return type < DCCP_TYPE_COUNT ? names[type] : "Reserved";
}

bool dccp_type_short_ok(unsigned type)
{
	return type == DCCP_DATA || type == DCCP_ACK || type == DCCP_DATAACK;
}

bool dccp_type_has_ack(unsigned type)
{
	return type < DCCP_TYPE_COUNT && type != DCCP_REQUEST && type != DCCP_DATA && type != DCCP_LISTEN;
}

size_t dccp_fixed_len(unsigned type, bool x)
{
	size_t gen = x ? 16 : 12, ack = x ? 8 : 4;

	switch (type) {
	case DCCP_REQUEST:
	case DCCP_LISTEN: return 16 + 4; /* Service Code */
	case DCCP_RESPONSE: return 16 + 8 + 4;
	case DCCP_DATA: return gen;
	case DCCP_ACK:
	case DCCP_DATAACK: return gen + ack;
	case DCCP_CLOSEREQ:
	case DCCP_CLOSE:
	case DCCP_SYNC:
	case DCCP_SYNCACK: return 16 + 8;
	case DCCP_RESET: return 16 + 8 + 4; /* Reset Code, Data 1-3 */
	default: return 0;
	}
}

/* ---- checksums ---------------------------------------------------------- */

uint32_t dccp_csum_add(uint32_t sum, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t s = sum;

	for (; len >= 2; p += 2, len -= 2)
		s += (uint32_t)p[0] << 8 | p[1];
	if (len)
		s += (uint32_t)p[0] << 8; /* pad on the right with a zero byte */
	while (s >> 32)
		s = (s & 0xffffffff) + (s >> 32);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

uint16_t dccp_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* RFC 4340 §9.1 (as TCP's, RFC 793 §3.1 and RFC 2460 §8.1) and RFC 768. */
static uint32_t pseudo_sum(const struct dccp_pseudo *ph, uint8_t proto, size_t len)
{
	uint32_t s;

	if (ph->family == AF_INET6) {
		uint8_t tail[8] = { (uint8_t)(len >> 24),
				    (uint8_t)(len >> 16),
				    (uint8_t)(len >> 8),
				    (uint8_t)len,
				    0,
				    0,
				    0,
				    proto };
		s = dccp_csum_add(0, ph->src, 16);
		s = dccp_csum_add(s, ph->dst, 16);
		return dccp_csum_add(s, tail, 8);
	}
	uint8_t tail[4] = { 0, proto, (uint8_t)(len >> 8), (uint8_t)len };
	s = dccp_csum_add(0, ph->src, 4);
	s = dccp_csum_add(s, ph->dst, 4);
	return dccp_csum_add(s, tail, 4);
}

size_t dccp_csum_cov(uint8_t cscov, size_t hdr_len, size_t pkt_len)
{
	if (cscov == 0)
		return pkt_len;
	if (cscov > 15 || hdr_len > pkt_len || (size_t)(cscov - 1) * 4 > pkt_len - hdr_len)
		return 0;
	return hdr_len + (size_t)(cscov - 1) * 4;
}

uint16_t dccp_csum(const uint8_t *p, size_t len, size_t cov, const struct dccp_pseudo *ph)
{
	/* the pseudo-header's length is the whole DCCP packet's, whatever CsCov */
	uint32_t s = pseudo_sum(ph, DCCP_IPPROTO, len);

	s = dccp_csum_add(s, p, 6);	      /* ports, Data Offset, CCVal/CsCov */
	s = dccp_csum_add(s, p + 8, cov - 8); /* Checksum field counts as 0 */
	return (uint16_t)~dccp_csum_fold(s);
}

void dccp_udp_wrap(uint8_t *udp, uint16_t sport, uint16_t dport, size_t dlen,
		   const struct dccp_pseudo *ph)
{
	size_t ulen = dlen + 8;

	udp[0] = (uint8_t)(sport >> 8), udp[1] = (uint8_t)sport;
	udp[2] = (uint8_t)(dport >> 8), udp[3] = (uint8_t)dport;
	udp[4] = (uint8_t)(ulen >> 8), udp[5] = (uint8_t)ulen;
	udp[6] = udp[7] = 0;
	uint16_t c = (uint16_t)~dccp_csum_fold(dccp_csum_add(pseudo_sum(ph, 17, ulen), udp, ulen));
	if (c == 0)
		c = 0xffff; /* RFC 768: a computed zero is sent as all ones */
	udp[6] = (uint8_t)(c >> 8), udp[7] = (uint8_t)c;
}

ssize_t dccp_udp_check(const uint8_t *udp, size_t len, const struct dccp_pseudo *ph,
		       struct dccp_counters *c)
{
	if (len < 8)
		goto bad;
	size_t ulen = (size_t)udp[4] << 8 | udp[5];
	/* RFC 6773 §3.3: UDP Length >= 8 + 12, not past the datagram; the UDP
	 * checksum must not be zero and must be right */
	if (ulen < 20 || ulen > len || (udp[6] == 0 && udp[7] == 0))
		goto bad;
	if (dccp_csum_fold(dccp_csum_add(pseudo_sum(ph, 17, ulen), udp, ulen)) != 0xffff)
		goto bad;
	return (ssize_t)(ulen - 8);
bad:
	dccp_count(c, DCCP_DROP_UDP);
	return -1;
}

/* ---- header ------------------------------------------------------------- */

static uint64_t get48(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static void put48(uint8_t *p, uint64_t v)
{
	for (int i = 5; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16), p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | get24(p + 1);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	put24(p + 1, v);
}

enum dccp_drop dccp_parse(const uint8_t *p, size_t len, const struct dccp_pseudo *ph,
			  struct dccp_hdr *h, struct dccp_counters *c)
{
	memset(h, 0, sizeof(*h));
	if (len < 12)
		return dccp_count(c, DCCP_DROP_SHORT);
	h->type = (p[8] >> 1) & 0x0f;
	h->x = p[8] & 1;
	if (h->type >= DCCP_TYPE_COUNT)
		return dccp_count(c, DCCP_DROP_TYPE_RESERVED);
	if (!h->x && !dccp_type_short_ok(h->type))
		return dccp_count(c, DCCP_DROP_SHORT_SEQNO);
	size_t fixed = dccp_fixed_len(h->type, h->x), hlen = (size_t)p[4] * 4;
	if (hlen < fixed)
		return dccp_count(c, DCCP_DROP_DOFF_SMALL);
	if (hlen > len)
		return dccp_count(c, DCCP_DROP_DOFF_LARGE);
	h->ccval = p[5] >> 4;
	h->cscov = p[5] & 0x0f;
	size_t cov = dccp_csum_cov(h->cscov, hlen, len);
	if (cov == 0)
		return dccp_count(c, DCCP_DROP_CSCOV);
	h->csum = (uint16_t)(p[6] << 8 | p[7]);
	if (ph && dccp_csum(p, len, cov, ph) != h->csum)
		return dccp_count(c, DCCP_DROP_CHECKSUM);

	h->sport = (uint16_t)(p[0] << 8 | p[1]);
	h->dport = (uint16_t)(p[2] << 8 | p[3]);
	h->doff = p[4];
	const uint8_t *q;
	if (h->x) {
		h->seq = get48(p + 10);
		q = p + 16;
	} else {
		h->seq = get24(p + 9);
		q = p + 12;
	}
	h->has_ack = dccp_type_has_ack(h->type);
	if (h->has_ack) {
		h->ack = h->x ? get48(q + 2) : get24(q + 1);
		q += h->x ? 8 : 4;
	}
	if (h->type == DCCP_REQUEST || h->type == DCCP_RESPONSE || h->type == DCCP_LISTEN)
		h->service = get32(q);
	if (h->type == DCCP_RESET) {
		h->reset_code = q[0];
		memcpy(h->reset_data, q + 1, 3);
	}
	h->fixed_len = (uint16_t)fixed;
	h->opt_off = (uint16_t)fixed;
	h->opt_len = (uint16_t)(hlen - fixed);
	h->data_off = (uint32_t)hlen;
	h->data_len = (uint32_t)(len - hlen);
	return DCCP_OK;
}

ssize_t dccp_build(uint8_t *buf, size_t cap, const struct dccp_hdr *h, const uint8_t *opts,
		   size_t optlen, const void *data, size_t dlen, const struct dccp_pseudo *ph)
{
	uint64_t lim = h->x ? DCCP_SEQ_MASK : 0xffffff;
	size_t fixed = dccp_fixed_len(h->type, h->x);

	if (h->type >= DCCP_TYPE_COUNT || (!h->x && !dccp_type_short_ok(h->type)) ||
	    h->ccval > 15 || h->cscov > 15 || h->seq > lim || optlen % 4 ||
	    (dccp_type_has_ack(h->type) && h->ack > lim) || (optlen && !opts) || (dlen && !data))
		return -EINVAL;
	size_t hlen = fixed + optlen, len = hlen + dlen;
	if (hlen > DCCP_MAX_HDR || len > 65535 || len > cap)
		return -EMSGSIZE;
	size_t cov = dccp_csum_cov(h->cscov, hlen, len);
	if (cov == 0)
		return -EINVAL;

	memset(buf, 0, fixed);
	buf[0] = (uint8_t)(h->sport >> 8), buf[1] = (uint8_t)h->sport;
	buf[2] = (uint8_t)(h->dport >> 8), buf[3] = (uint8_t)h->dport;
	buf[4] = (uint8_t)(hlen / 4);
	buf[5] = (uint8_t)(h->ccval << 4 | h->cscov);
	buf[8] = (uint8_t)(h->type << 1 | (h->x ? 1 : 0));
	uint8_t *q;
	if (h->x) {
		put48(buf + 10, h->seq);
		q = buf + 16;
	} else {
		put24(buf + 9, (uint32_t)h->seq);
		q = buf + 12;
	}
	if (dccp_type_has_ack(h->type)) {
		if (h->x)
			put48(q + 2, h->ack);
		else
			put24(q + 1, (uint32_t)h->ack);
		q += h->x ? 8 : 4;
	}
	if (h->type == DCCP_REQUEST || h->type == DCCP_RESPONSE || h->type == DCCP_LISTEN)
		put32(q, h->service);
	if (h->type == DCCP_RESET) {
		q[0] = h->reset_code;
		memcpy(q + 1, h->reset_data, 3);
	}
	if (optlen)
		memcpy(buf + fixed, opts, optlen);
	if (dlen)
		memcpy(buf + hlen, data, dlen);
	if (ph) {
		uint16_t s = dccp_csum(buf, len, cov, ph);
		buf[6] = (uint8_t)(s >> 8), buf[7] = (uint8_t)s;
	}
	return (ssize_t)len;
}

/* ---- sequence numbers --------------------------------------------------- */

uint64_t dccp_seq_extend(uint32_t s, uint64_t ref)
{
	const uint32_t m24 = 0xffffff;
	uint32_t lo = (uint32_t)(ref & m24), hi = (uint32_t)(ref >> 24) & m24;

	s &= m24;
	/* "REF_low (<) S": (S - REF_low) mod 2^24 <= 2^23 */
	bool lo_lt_s = ((s - lo) & m24) <= (1u << 23);
	bool s_lt_lo = ((lo - s) & m24) <= (1u << 23);
	if (lo_lt_s && s < lo)
		hi = (hi + 1) & m24;
	else if (s_lt_lo && lo < s)
		hi = (hi - 1) & m24;
	return (uint64_t)hi << 24 | s;
}

struct dccp_windows dccp_windows(const struct dccp_seqstate *s)
{
	struct dccp_windows w;

	w.swl = dccp_seq_sub(dccp_seq_add(s->gsr, 1), s->w_rx / 4);
	w.swh = dccp_seq_add(s->gsr, (int64_t)((3 * s->w_rx + 3) / 4));
	w.awl = dccp_seq_sub(dccp_seq_add(s->gss, 1), s->w_tx);
	w.awh = s->gss;
	if (s->initial) { /* SWL := max(SWL, ISR), AWL := max(AWL, ISS) */
		if (dccp_seq_before(w.swl, s->isr))
			w.swl = s->isr;
		if (dccp_seq_before(w.awl, s->iss))
			w.awl = s->iss;
	}
	return w;
}

enum dccp_seqvalid dccp_seq_valid(const struct dccp_seqstate *s, const struct dccp_hdr *h,
				  enum dccp_seqcheck mode, bool listen_or_request)
{
	struct dccp_windows w = dccp_windows(s);
	uint64_t seq = h->x ? h->seq : dccp_seq_extend((uint32_t)h->seq, s->gsr);
	uint64_t ack = h->x ? h->ack : dccp_seq_extend((uint32_t)h->ack, s->gss);
	bool seq_ok, ack_ok = true;

	switch (h->type) {
	case DCCP_REQUEST:
	case DCCP_RESPONSE:
		seq_ok = listen_or_request || dccp_seq_between(seq, w.swl, w.swh);
		if (h->type == DCCP_RESPONSE)
			ack_ok = dccp_seq_between(ack, w.awl, w.awh);
		break;
	case DCCP_DATA:
	case DCCP_ACK:
	case DCCP_DATAACK:
		seq_ok = dccp_seq_between(seq, w.swl, w.swh);
		if (h->type != DCCP_DATA)
			ack_ok = dccp_seq_between(ack, w.awl, w.awh);
		break;
	case DCCP_CLOSEREQ:
	case DCCP_CLOSE:
	case DCCP_RESET:
		seq_ok = mode == DCCP_SEQCHK_STRICT
			? seq == dccp_seq_add(s->gsr, 1)
			: dccp_seq_between(seq, dccp_seq_add(s->gsr, 1), w.swh);
		ack_ok = dccp_seq_between(ack, s->gar, w.awh);
		break;
	case DCCP_SYNC:
	case DCCP_SYNCACK:
		/* "SWL <= seqno": not strongly checked unless the connection is active */
		seq_ok = mode == DCCP_SEQCHK_NORMAL ? !dccp_seq_before(seq, w.swl)
						    : dccp_seq_between(seq, w.swl, w.swh);
		ack_ok = dccp_seq_between(ack, w.awl, w.awh);
		break;
	default: /* Listen: its numbers mean nothing (RFC 5596 §2.2.1) */ return DCCP_SEQ_VALID;
	}
	if (!seq_ok)
		return DCCP_SEQ_BAD_SEQNO;
	return ack_ok ? DCCP_SEQ_VALID : DCCP_SEQ_BAD_ACKNO;
}

bool dccp_invalid_response(const struct dccp_seqstate *s, const struct dccp_hdr *h, uint64_t *ack)
{
	switch (h->type) {
	case DCCP_SYNC:
	case DCCP_SYNCACK:
	case DCCP_LISTEN: return false;
	case DCCP_RESET: *ack = s->gsr; return true;
	default: *ack = h->x ? h->seq : dccp_seq_extend((uint32_t)h->seq, s->gsr); return true;
	}
}

bool dccp_sync_allow(struct dccp_sync_limit *l, uint64_t now_ns)
{
	/* the oldest of the last DCCP_SYNC_RATE must be a second old */
	if (l->n == DCCP_SYNC_RATE && now_ns - l->sent_ns[l->next] < 1000000000ull)
		return false;
	l->sent_ns[l->next] = now_ns;
	l->next = (l->next + 1) % DCCP_SYNC_RATE;
	if (l->n < DCCP_SYNC_RATE)
		l->n++;
	return true;
}
