/* SPDX-License-Identifier: MIT */
/*
 * DCCP options:
 *   RFC 4340 §5.8      option format, lengths, which packet types take which
 *                      option (the "DCCP-Data?" column and each option's rules)
 *   RFC 4340 §5.8.1-2  Padding, Mandatory (and the Resets it calls for)
 *   RFC 4340 §6.1-6.2  Change/Confirm L/R framing (values: feature.c)
 *   RFC 4340 §7.7      NDP Count          §8.1.4  Init Cookie
 *   RFC 4340 §9.3      Data Checksum (CRC-32c)
 *   RFC 4340 §11.4     Ack Vector         §11.6   Slow Receiver
 *   RFC 4340 §11.7     Data Dropped       §13     Timestamp, Timestamp Echo, Elapsed Time
 *   RFC 4342 §8.3, §8.5, §8.6  CCID 3 Receive Rate, Loss Event Rate, Loss Intervals
 * RFC 5596 §2.2.1: options on DCCP-Listen are ignored.
 */
#include <pthread.h>
#include <string.h>

#include "dccp/options.h"

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t getn(const uint8_t *p, unsigned n)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Why op cannot be accepted on this packet (DCCP_OK if it can). */
static enum dccp_drop check(const struct dccp_hdr *h, unsigned flags, const struct dccp_opt *op,
			    unsigned nli)
{
	bool data = h->type == DCCP_DATA;
	unsigned n = op->len;

	switch (op->type) {
	case DCCP_OPT_CHANGE_L:
	case DCCP_OPT_CHANGE_R:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		return n >= 2 ? DCCP_OK : DCCP_DROP_OPT_SIZE; /* feature number, >= 1 value */
	case DCCP_OPT_CONFIRM_L:
	case DCCP_OPT_CONFIRM_R:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		if (!h->has_ack) /* §6.6.1: a Confirm travels with an Acknowledgement Number */
			return DCCP_DROP_OPT_NO_ACKNO;
		return n >= 1 ? DCCP_OK : DCCP_DROP_OPT_SIZE; /* empty Confirm: feature number only */
	case DCCP_OPT_INIT_COOKIE:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		if (h->type == DCCP_REQUEST || (flags & DCCP_PF_ESTABLISHED))
			return DCCP_DROP_OPT_EARLY;
		return DCCP_OK;
	case DCCP_OPT_NDP_COUNT: return n >= 1 && n <= 6 ? DCCP_OK : DCCP_DROP_OPT_SIZE;
	case DCCP_OPT_ACKVEC0:
	case DCCP_OPT_ACKVEC1:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		if (!h->has_ack)
			return DCCP_DROP_OPT_NO_ACKNO;
		/* Linux parsed Ack Vectors on handshake packets and got its
		 * bookkeeping wrong; before OPEN there is nothing to acknowledge */
		if (!(flags & DCCP_PF_ESTABLISHED))
			return DCCP_DROP_OPT_EARLY;
		if (n == 0)
			return DCCP_DROP_OPT_SIZE;
		for (unsigned i = 0; i < n; i++)
			if (op->data[i] >> 6 == 2) /* State 2 is reserved */
				return DCCP_DROP_OPT_VALUE;
		return DCCP_OK;
	case DCCP_OPT_DATA_DROPPED:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		if (!h->has_ack)
			return DCCP_DROP_OPT_NO_ACKNO;
		return n >= 1 ? DCCP_OK : DCCP_DROP_OPT_SIZE;
	case DCCP_OPT_TIMESTAMP:
	case DCCP_OPT_DATA_CHECKSUM: return n == 4 ? DCCP_OK : DCCP_DROP_OPT_SIZE;
	case DCCP_OPT_TS_ECHO: return n == 4 || n == 6 || n == 8 ? DCCP_OK : DCCP_DROP_OPT_SIZE;
	case DCCP_OPT_ELAPSED:
		if (!h->has_ack)
			return DCCP_DROP_OPT_NO_ACKNO;
		return n == 2 || n == 4 ? DCCP_OK : DCCP_DROP_OPT_SIZE;
	case DCCP_OPT_LOSS_EVENT_RATE:
	case DCCP_OPT_RECEIVE_RATE:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		return n == 4 ? DCCP_OK : DCCP_DROP_OPT_SIZE;
	case DCCP_OPT_LOSS_INTERVALS:
		if (data)
			return DCCP_DROP_OPT_ON_DATA;
		if (!h->has_ack)
			return DCCP_DROP_OPT_NO_ACKNO;
		if (n < 10 || (n - 1) % 9)
			return DCCP_DROP_OPT_SIZE;
		/* Skip Length <= NDUPACK = 3, and 0 on any later Loss Intervals option */
		if (op->data[0] > 3 || (nli > 0 && op->data[0] != 0))
			return DCCP_DROP_OPT_VALUE;
		return DCCP_OK;
	default: return DCCP_DROP_OPT_UNKNOWN;
	}
}

static void decode(struct dccp_opts *o, const struct dccp_opt *op)
{
	const uint8_t *d = op->data;

	switch (op->type) {
	case DCCP_OPT_NDP_COUNT: {
		uint64_t v = 0;
		for (unsigned i = 0; i < op->len; i++)
			v = v << 8 | d[i];
		o->ndp_count = v;
		o->has_ndp = true;
		break;
	}
	case DCCP_OPT_TIMESTAMP:
		o->ts = getn(d, 4);
		o->has_ts = true;
		break;
	case DCCP_OPT_TS_ECHO:
		o->ts_echo = getn(d, 4);
		o->ts_echo_elapsed = getn(d + 4, op->len - 4u);
		o->has_ts_echo = true;
		break;
	case DCCP_OPT_ELAPSED:
		o->elapsed = getn(d, op->len);
		o->has_elapsed = true;
		break;
	case DCCP_OPT_DATA_CHECKSUM:
		o->data_csum = getn(d, 4);
		o->has_data_csum = true;
		break;
	case DCCP_OPT_LOSS_EVENT_RATE:
		o->loss_rate = getn(d, 4);
		o->has_loss_rate = true;
		break;
	case DCCP_OPT_RECEIVE_RATE:
		o->recv_rate = getn(d, 4);
		o->has_recv_rate = true;
		break;
	}
}

/* Reset with code (5 or 6) naming option type t with data d[0..n) (§5.6). */
static enum dccp_drop want_reset(struct dccp_opts *o, struct dccp_counters *c, enum dccp_drop e,
				 uint8_t code, uint8_t t, const uint8_t *d, unsigned n)
{
	o->reset_code = code;
	o->reset_data[0] = t;
	o->reset_data[1] = n > 0 ? d[0] : 0;
	o->reset_data[2] = n > 1 ? d[1] : 0;
	return dccp_count(c, e);
}

enum dccp_drop dccp_opts_parse(const struct dccp_hdr *h, const uint8_t *pkt, unsigned flags,
			       struct dccp_opts *o, struct dccp_counters *c)
{
	const uint8_t *p = pkt + h->opt_off, *end = p + h->opt_len;
	bool data = h->type == DCCP_DATA, mandatory = false;
	unsigned nli = 0;

	memset(o, 0, sizeof(*o));
	if (h->type == DCCP_LISTEN) /* RFC 5596 §2.2.1: clients ignore them */
		return DCCP_OK;
	while (p < end) {
		uint8_t t = *p;
		if (t < 32) { /* one-byte options */
			p++;
			if (t == DCCP_OPT_MANDATORY) {
				if (data) { /* ignored on DCCP-Data (§5.8.2) */
					dccp_count(c, DCCP_DROP_OPT_ON_DATA);
					continue;
				}
				if (mandatory) /* Mandatory Mandatory */
					return want_reset(o, c, DCCP_DROP_OPT_MANDATORY,
							  DCCP_RESET_OPTION_ERROR, t, NULL, 0);
				mandatory = true;
				continue;
			}
			bool m = mandatory;
			mandatory = false;
			if (t == DCCP_OPT_PADDING) /* "Mandatory Padding" is two Paddings */
				continue;
			if (t == DCCP_OPT_SLOW_RECEIVER) {
				o->slow_receiver = true;
				continue;
			}
			dccp_count(c, DCCP_DROP_OPT_UNKNOWN); /* reserved 3-31 */
			if (m)
				return want_reset(o, c, DCCP_DROP_OPT_MANDATORY,
						  DCCP_RESET_MANDATORY_ERROR, t, NULL, 0);
			continue;
		}
		/* a nonsensical length: ignore this option and all that follows */
		if (end - p < 2 || p[1] < 2 || p[1] > end - p) {
			dccp_count(c, DCCP_DROP_OPT_LEN);
			if (mandatory)
				return want_reset(o, c, DCCP_DROP_OPT_MANDATORY,
						  DCCP_RESET_MANDATORY_ERROR, t, NULL, 0);
			return DCCP_OK;
		}
		struct dccp_opt op = { t, (uint8_t)(p[1] - 2), mandatory, p + 2 };
		p += p[1];
		mandatory = false;
		enum dccp_drop e = check(h, flags, &op, nli);
		if (e != DCCP_OK) {
			dccp_count(c, e);
			if (op.mandatory) /* O was not processed: §5.8.2 */
				return want_reset(o, c, DCCP_DROP_OPT_MANDATORY,
						  DCCP_RESET_MANDATORY_ERROR, t, op.data, op.len);
			continue;
		}
		if (t == DCCP_OPT_LOSS_INTERVALS)
			nli++;
		decode(o, &op);
		if (o->n < DCCP_OPTS_MAX) {
			o->opt[o->n++] = op;
		} else {
			dccp_count(c, DCCP_DROP_OPT_TOO_MANY);
			if (op.mandatory) /* the caller never sees it, so cannot process it */
				return want_reset(o, c, DCCP_DROP_OPT_MANDATORY,
						  DCCP_RESET_MANDATORY_ERROR, t, op.data, op.len);
		}
	}
	if (mandatory) /* Mandatory was the last byte of the option list */
		return want_reset(o, c, DCCP_DROP_OPT_MANDATORY, DCCP_RESET_OPTION_ERROR,
				  DCCP_OPT_MANDATORY, NULL, 0);
	return DCCP_OK;
}

/* ---- run-length vectors ------------------------------------------------- */

static void vec_iter(struct dccp_vec_iter *it, const struct dccp_opts *o, uint64_t ackno,
		     uint64_t lowest, uint8_t kind)
{
	memset(it, 0, sizeof(*it));
	it->o = o;
	it->kind = kind;
	it->next = it->ackno = ackno & DCCP_SEQ_MASK;
	it->lowest = lowest & DCCP_SEQ_MASK;
	it->nonce = -1;
	if (kind == DCCP_OPT_DATA_DROPPED)
		return;
	for (unsigned k = 0, seen = 0; k < o->n; k++) {
		int t = o->opt[k].type;
		if (t != DCCP_OPT_ACKVEC0 && t != DCCP_OPT_ACKVEC1)
			continue;
		int nonce = t - DCCP_OPT_ACKVEC0;
		it->nonce = seen++ == 0 || it->nonce == nonce ? nonce : -1;
		if (it->nonce < 0)
			break;
	}
}

void dccp_ackvec_iter(struct dccp_vec_iter *it, const struct dccp_opts *o, uint64_t ackno, uint64_t lowest)
{
	vec_iter(it, o, ackno, lowest, DCCP_OPT_ACKVEC0);
}

void dccp_dropped_iter(struct dccp_vec_iter *it, const struct dccp_opts *o, uint64_t ackno, uint64_t lowest)
{
	vec_iter(it, o, ackno, lowest, DCCP_OPT_DATA_DROPPED);
}

bool dccp_vec_next(struct dccp_vec_iter *it, struct dccp_run *r)
{
	while (it->k < it->o->n) {
		const struct dccp_opt *op = &it->o->opt[it->k];
		bool mine = it->kind == DCCP_OPT_DATA_DROPPED
			? op->type == DCCP_OPT_DATA_DROPPED
			: op->type == DCCP_OPT_ACKVEC0 || op->type == DCCP_OPT_ACKVEC1;
		if (!mine || it->i >= op->len) {
			it->k++;
			it->i = 0;
			continue;
		}
		uint8_t b = op->data[it->i++];
		if (it->kind != DCCP_OPT_DATA_DROPPED) {
			r->state = b >> 6;
			r->len = (b & 0x3f) + 1u;
		} else if (b & 0x80) { /* Drop Block: 1, Drop Code, Run Len */
			r->state = (b >> 4) & 7;
			r->len = (b & 0x0f) + 1u;
		} else { /* Normal Block */
			r->state = DCCP_DROP_NONE;
			r->len = (b & 0x7f) + 1u;
		}
		r->hi = it->next;
		r->lo = dccp_seq_sub(it->next, r->len - 1);
		/* the previous run ended at lowest: the rest is below it */
		if (!dccp_seq_between(r->hi, it->lowest, it->ackno)) {
			it->clipped = true;
			it->k = it->o->n;
			return false;
		}
		/* this run reaches below lowest: cut it there, and stop */
		if (!dccp_seq_between(r->lo, it->lowest, r->hi)) {
			r->lo = it->lowest;
			r->len = (uint32_t)dccp_seq_sub(r->hi, r->lo) + 1; /* <= 128 */
			it->clipped = true;
			it->k = it->o->n;
			return true;
		}
		it->next = dccp_seq_sub(r->lo, 1);
		return true;
	}
	return false;
}

unsigned dccp_loss_intervals(const struct dccp_opts *o, struct dccp_loss_interval *out,
			     unsigned max, uint8_t *skip)
{
	unsigned n = 0;
	bool first = true;

	*skip = 0;
	for (unsigned k = 0; k < o->n; k++) {
		const struct dccp_opt *op = &o->opt[k];
		if (op->type != DCCP_OPT_LOSS_INTERVALS)
			continue;
		if (first)
			*skip = op->data[0];
		first = false;
		for (unsigned j = 1; j + 9 <= op->len && n < max; j += 9) {
			const uint8_t *d = op->data + j;
			out[n].lossless = get24(d);
			out[n].ecn_echo = d[3] >> 7;
			out[n].loss = get24(d + 3) & 0x7fffff;
			out[n].data = get24(d + 6);
			n++;
		}
	}
	return n;
}

/* ---- building ----------------------------------------------------------- */

void dccp_opt_put(struct dccp_obuf *b, uint8_t type, const void *data, size_t dlen)
{
	size_t need = type < 32 ? 1 : 2 + dlen;

	if (b->overflow || (type < 32 && dlen) || dlen > 253 || need > b->cap - b->len) {
		b->overflow = true;
		return;
	}
	b->p[b->len++] = type;
	if (type < 32)
		return;
	b->p[b->len++] = (uint8_t)(2 + dlen);
	if (dlen)
		memcpy(b->p + b->len, data, dlen);
	b->len += dlen;
}

void dccp_obuf_pad(struct dccp_obuf *b)
{
	while (!b->overflow && b->len % 4)
		dccp_opt_put(b, DCCP_OPT_PADDING, NULL, 0);
}

static void put_be(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = n; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

void dccp_opt_put_ndp(struct dccp_obuf *b, uint64_t count)
{
	uint8_t d[6];
	unsigned n = 1;

	while (n < 6 && count >> (8 * n))
		n++;
	put_be(d, count, n);
	dccp_opt_put(b, DCCP_OPT_NDP_COUNT, d, n);
}

void dccp_opt_put_timestamp(struct dccp_obuf *b, uint32_t ts)
{
	uint8_t d[4];
	put_be(d, ts, 4);
	dccp_opt_put(b, DCCP_OPT_TIMESTAMP, d, 4);
}

void dccp_opt_put_ts_echo(struct dccp_obuf *b, uint32_t echo, uint32_t elapsed)
{
	uint8_t d[8];
	unsigned n = elapsed == 0 ? 0 : elapsed <= 0xffff ? 2 : 4;

	put_be(d, echo, 4);
	put_be(d + 4, elapsed, n);
	dccp_opt_put(b, DCCP_OPT_TS_ECHO, d, 4 + n);
}

void dccp_opt_put_elapsed(struct dccp_obuf *b, uint32_t elapsed)
{
	uint8_t d[4];
	unsigned n = elapsed < 50000 ? 2 : 4; /* 50000 hundredths of ms = 0.5 s */

	put_be(d, elapsed, n);
	dccp_opt_put(b, DCCP_OPT_ELAPSED, d, n);
}

void dccp_opt_put_data_checksum(struct dccp_obuf *b, const void *data, size_t len)
{
	dccp_opt_put_u32(b, DCCP_OPT_DATA_CHECKSUM, dccp_crc32c(data, len));
}

void dccp_opt_put_u32(struct dccp_obuf *b, uint8_t type, uint32_t v)
{
	uint8_t d[4];
	put_be(d, v, 4);
	dccp_opt_put(b, type, d, 4);
}

void dccp_opt_put_loss_intervals(struct dccp_obuf *b, uint8_t skip,
				 const struct dccp_loss_interval *li, unsigned n)
{
	uint8_t d[1 + 28 * 9];

	if (n == 0 || n > 28 || skip > 3) {
		b->overflow = true;
		return;
	}
	d[0] = skip;
	for (unsigned i = 0; i < n; i++) {
		uint8_t *q = d + 1 + 9 * i;
		put_be(q, li[i].lossless, 3);
		put_be(q + 3, (li[i].loss & 0x7fffff) | (li[i].ecn_echo ? 0x800000u : 0), 3);
		put_be(q + 6, li[i].data, 3);
	}
	dccp_opt_put(b, DCCP_OPT_LOSS_INTERVALS, d, 1 + 9 * n);
}

void dccp_opt_put_vector(struct dccp_obuf *b, uint8_t type, const uint8_t *vec, size_t n)
{
	while (n) {
		size_t k = n > 253 ? 253 : n;
		dccp_opt_put(b, type, vec, k);
		vec += k;
		n -= k;
	}
}

bool dccp_ackvec_rle(uint8_t *vec, size_t *n, size_t cap, uint8_t state, uint64_t count)
{
	while (count) {
		uint64_t k = count > 64 ? 64 : count;
		if (*n >= cap)
			return false;
		vec[(*n)++] = (uint8_t)((uint64_t)state << 6 | (k - 1)); /* k <= 64 */
		count -= k;
	}
	return true;
}

bool dccp_dropped_rle(uint8_t *vec, size_t *n, size_t cap, uint8_t code, uint64_t count)
{
	bool normal = code == DCCP_DROP_NONE;
	uint64_t max = normal ? 128 : 16;

	if (!normal && code > 7)
		return false;
	while (count) {
		uint64_t k = count > max ? max : count;
		if (*n >= cap)
			return false;
		vec[(*n)++] = (uint8_t)(normal ? k - 1 : 0x80u | (uint64_t)code << 4 | (k - 1)); /* k <= max */
		count -= k;
	}
	return true;
}

/* ---- CRC-32c ------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t r = i;
		for (int k = 0; k < 8; k++)
			r = r & 1 ? (r >> 1) ^ 0x82f63b78u : r >> 1; /* reflected Castagnoli */
		crc_table[i] = r;
	}
}

uint32_t dccp_crc32c(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t crc = 0xffffffffu;

	pthread_once(&crc_once, crc_init);
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc ^ 0xffffffffu;
}
