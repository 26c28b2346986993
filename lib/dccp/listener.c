/* SPDX-License-Identifier: MIT */
/*
 * listener.c - the stateless server side of the DCCP handshake (RFC 4340
 * §8.1.4 Init Cookie), apart from the connection as Linux keeps it in
 * minisocks.c.  See conn.h.
 *
 * Holds, in order: the cookie encoding and its MAC, the keyed ISS for
 * peers that do not echo the cookie (Linux), the per-source Response
 * budget, stateless replies, and dccp_listener_input(): Requests get a
 * Response with a cookie (features answered, §13.3 Timestamp echoed),
 * other packets a Reset; an Ack or DataAck with a valid, unused cookie
 * becomes an OPEN connection through dccp_conn_accept() (conn.c).  No
 * state is kept before that, but the replay table of cookies used.
 */
#include <string.h>

#include <sodium.h>

#include "dccp/conn.h"
#include "dccp/feature.h"

#define MS 1000000ull

void dccp_listener_init(struct dccp_listener *l, const struct dccp_conn_params *p)
{
	memset(l, 0, sizeof(*l));
	l->p = *p;
	l->per_source_rate = 16;
	randombytes_buf(l->key, sizeof(l->key));
}

static void put48(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 6; i++)
		b[i] = (uint8_t)(v >> (40 - 8 * i));
}

static uint64_t get48(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = (v << 8) | b[i];
	return v;
}

/*
 * Cookie: ccid(1) iss(6) isr(6) time_s(4) peer_seqwin(3) mac(8).  The MAC
 * (SipHash-2-4 under the listener's random key) covers the first 20 bytes,
 * both addresses, both ports and the Service Code, so a cookie is good for
 * one 4-tuple only, and for DCCP_COOKIE_LIFE_S seconds.
 */
static uint64_t cookie_mac(const struct dccp_listener *l, const uint8_t *ck,
			   const struct dccp_pseudo *ph_in, uint16_t sport, uint16_t dport,
			   uint32_t service)
{
	uint8_t m[20 + 32 + 8];
	memcpy(m, ck, 20);
	memcpy(m + 20, ph_in->src, 16);
	memcpy(m + 36, ph_in->dst, 16);
	m[52] = (uint8_t)(sport >> 8), m[53] = (uint8_t)sport;
	m[54] = (uint8_t)(dport >> 8), m[55] = (uint8_t)dport;
	m[56] = (uint8_t)(service >> 24), m[57] = (uint8_t)(service >> 16);
	m[58] = (uint8_t)(service >> 8), m[59] = (uint8_t)service;
	uint8_t out[8];
	crypto_shorthash(out, m, sizeof(m), l->key);
	uint64_t v;
	memcpy(&v, out, 8);
	return v;
}

/*
 * The ISS of a Response is not random but keyed (SipHash of the 4-tuple, the
 * Service Code, the client's ISS and a DCCP_COOKIE_LIFE_S time bucket), like
 * TCP's SYN cookies, because Linux's DCCP (6.1 and before) does not echo the
 * Init Cookie in its Ack although RFC 4340 §8.1.4 says the client MUST: its
 * Ack acknowledges our ISS and carries ISR + 1, which is enough to recognise
 * a handshake we answered.  Byte 0 = 0xff keeps these MAC inputs apart from
 * real cookies (whose byte 0 is the CCID, 2 or 3).
 */
static uint64_t keyed_iss(const struct dccp_listener *l, const struct dccp_pseudo *ph_in,
			  const struct dccp_hdr *h, uint64_t isr, uint32_t bucket)
{
	uint8_t m[20] = { 0xff };
	put48(m + 7, isr);
	m[13] = (uint8_t)(bucket >> 24), m[14] = (uint8_t)(bucket >> 16);
	m[15] = (uint8_t)(bucket >> 8), m[16] = (uint8_t)bucket;
	return cookie_mac(l, m, ph_in, h->sport, h->dport, l->p.service) & DCCP_SEQ_MASK;
}

/* A cookie-less Ack (see keyed_iss): rebuild the cookie it should have
 * echoed (peer Sequence Window: the default) if its Ack Number is the ISS we
 * derived for an ISR a few packets below its Sequence Number, within the
 * cookie's lifetime.  At most 2 x 8 MACs per such packet. */
static bool cookieless_ack(const struct dccp_listener *l, const struct dccp_pseudo *ph_in,
			   const struct dccp_hdr *h, uint64_t now_ns, uint8_t *ck)
{
	uint32_t now_s = (uint32_t)(now_ns / 1000000000ull), b = now_s / DCCP_COOKIE_LIFE_S;
	for (uint32_t k = 0; k < 2 && k <= b; k++) /* this bucket and the one before */
		for (int d = 1; d <= 8; d++) {
			uint64_t isr = dccp_seq_add(h->seq, -d);
			if (h->ack != keyed_iss(l, ph_in, h, isr, b - k))
				continue;
			ck[0] = l->p.ccid;
			put48(ck + 1, h->ack);
			put48(ck + 7, isr);
			uint32_t t = (b - k) * DCCP_COOKIE_LIFE_S;
			ck[13] = (uint8_t)(t >> 24), ck[14] = (uint8_t)(t >> 16);
			ck[15] = (uint8_t)(t >> 8), ck[16] = (uint8_t)t;
			ck[17] = 0, ck[18] = 0, ck[19] = 100;
			/* a MAC as a cookie has, for the replay table */
			uint64_t mac = cookie_mac(l, ck, ph_in, h->sport, h->dport, l->p.service);
			memcpy(ck + 20, &mac, 8);
			return true;
		}
	return false;
}

static bool rate_ok(struct dccp_listener *l, const struct dccp_pseudo *ph_in, uint64_t now_ns)
{
	uint8_t h8[8];
	crypto_shorthash(h8, ph_in->src, 16, l->key);
	uint32_t h;
	memcpy(&h, h8, 4);
	unsigned slot = h % DCCP_RL_BUCKETS;
	if (now_ns - l->rl[slot].window_ns >= 1000 * MS) {
		l->rl[slot].window_ns = now_ns;
		l->rl[slot].n = 0;
	}
	if (l->rl[slot].n >= l->per_source_rate)
		return false;
	l->rl[slot].n++;
	return true;
}

/* A stateless reply: Response or Reset, seq given. */
static void l_reply(const struct dccp_listener *l, const struct dccp_hdr *in, uint8_t type,
		    uint64_t seq, const uint8_t *opts, size_t optlen, uint8_t code,
		    const struct dccp_pseudo *ph_out, bool udp,
		    int (*emitfn)(void *arg, const uint8_t *p, size_t len), void *arg)
{
	uint8_t pkt[256];
	struct dccp_hdr h = { .sport = in->dport,
			      .dport = in->sport,
			      .type = type,
			      .x = true,
			      .seq = seq,
			      .has_ack = true,
			      .ack = in->seq,
			      .service = l->p.service,
			      .reset_code = code };
	(void)l;
	ssize_t n = dccp_build(pkt, sizeof(pkt), &h, opts, optlen, NULL, 0, udp ? NULL : ph_out);
	if (n > 0)
		emitfn(arg, pkt, (size_t)n);
}

bool dccp_listener_input(struct dccp_listener *l, const uint8_t *pkt, size_t len,
			 const struct dccp_hdr *h, const struct dccp_pseudo *ph_in,
			 const struct dccp_pseudo *ph_out, bool udp, uint64_t now_ns,
			 int (*emitfn)(void *arg, const uint8_t *p, size_t len), void *emit_arg,
			 struct dccp_conn *c, const struct dccp_conn_env *env)
{
	(void)len;
	if (h->dport != l->p.sport)
		return false;
	struct dccp_opts o;
	if (dccp_opts_parse(h, pkt, 0, &o, &l->err) != DCCP_OK && !o.reset_code)
		return false;
	if (h->type == DCCP_REQUEST) {
		l->requests++;
		if (!rate_ok(l, ph_in, now_ns))
			return false; /* a flood from one source: it costs nothing here */
		uint64_t iss = keyed_iss(l, ph_in, h, h->seq,
					 (uint32_t)(now_ns / 1000000000ull) / DCCP_COOKIE_LIFE_S);
		if (h->service != l->p.service) {
			l->resets++;
			l_reply(l, h, DCCP_RESET, iss, NULL, 0, DCCP_RESET_BAD_SERVICE_CODE, ph_out,
				udp, emitfn, emit_arg);
			return false;
		}
		uint8_t ob[200];
		struct dccp_obuf b;
		dccp_obuf_init(&b, ob, sizeof(ob));
		struct dccp_nn_seen nn = { .peer_seqwin = 100 };
		uint8_t reset = 0;
		if (o.reset_code ||
		    !dccp_conn_features(&o, &b, l->p.ccid, &nn, 0, NULL, NULL, &reset, &l->err)) {
			l->resets++;
			l_reply(l, h, DCCP_RESET, iss, NULL, 0, o.reset_code ? o.reset_code : reset,
				ph_out, udp, emitfn, emit_arg);
			return false;
		}
		/* our own Sequence Window rides on the Response, so that it is in
		 * force before data flows (the Ack confirms it; nothing to keep) */
		if (l->p.seq_window != 100)
			dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, l->p.seq_window);
		dccp_conn_put_ndp_change(&b);
		/* §13.3: echo the Request's Timestamp (held for no time: the
		 * listener answers at once).  As large as the Timestamp that
		 * asked for it, so no amplification; Linux's CCID 3 client takes
		 * its first RTT from it (dccps_syn_rtt) */
		if (o.has_ts)
			dccp_opt_put_ts_echo(&b, o.ts, 0);
		uint8_t ck[DCCP_COOKIE_LEN];
		ck[0] = l->p.ccid;
		put48(ck + 1, iss);
		put48(ck + 7, h->seq);
		uint32_t t = (uint32_t)(now_ns / 1000000000ull);
		ck[13] = (uint8_t)(t >> 24), ck[14] = (uint8_t)(t >> 16);
		ck[15] = (uint8_t)(t >> 8), ck[16] = (uint8_t)t;
		uint32_t w = nn.peer_seqwin > 0xffffff ? 0xffffff : (uint32_t)nn.peer_seqwin;
		ck[17] = (uint8_t)(w >> 16), ck[18] = (uint8_t)(w >> 8), ck[19] = (uint8_t)w;
		uint64_t mac = cookie_mac(l, ck, ph_in, h->sport, h->dport, h->service);
		memcpy(ck + 20, &mac, 8);
		dccp_opt_put(&b, DCCP_OPT_INIT_COOKIE, ck, sizeof(ck));
		dccp_obuf_pad(&b);
		if (b.overflow) {
			l->resets++;
			l_reply(l, h, DCCP_RESET, iss, NULL, 0, DCCP_RESET_TOO_BUSY, ph_out, udp,
				emitfn, emit_arg);
			return false;
		}
		l->responses++;
		l_reply(l, h, DCCP_RESPONSE, iss, ob, b.len, 0, ph_out, udp, emitfn, emit_arg);
		return false;
	}
	if (h->type != DCCP_ACK && h->type != DCCP_DATAACK) {
		/* no connection here: Reset (not to Resets, §8.3.1; and not to
		 * packets a connection of ours owns: the caller routes those first) */
		if (dccp_draws_reset(h->type)) {
			l->resets++;
			l_reply(l, h, DCCP_RESET, h->has_ack ? dccp_seq_add(h->ack, 1) : 0, NULL, 0,
				DCCP_RESET_NO_CONNECTION, ph_out, udp, emitfn, emit_arg);
		}
		return false;
	}
	const struct dccp_opt *co = NULL;
	for (unsigned i = 0; i < o.n; i++)
		if (o.opt[i].type == DCCP_OPT_INIT_COOKIE)
			co = &o.opt[i];
	uint8_t ck[DCCP_COOKIE_LEN];
	bool good = co && co->len == DCCP_COOKIE_LEN;
	if (good) {
		memcpy(ck, co->data, sizeof(ck));
		uint64_t mac;
		memcpy(&mac, ck + 20, 8);
		uint32_t t = (uint32_t)ck[13] << 24 | (uint32_t)ck[14] << 16 |
			(uint32_t)ck[15] << 8 | ck[16];
		uint32_t now_s = (uint32_t)(now_ns / 1000000000ull);
		good = sodium_memcmp(&mac,
				     &(uint64_t){ cookie_mac(l, ck, ph_in, h->sport, h->dport,
							     l->p.service) },
				     8) == 0 &&
			now_s - t <= DCCP_COOKIE_LIFE_S && ck[0] == l->p.ccid &&
			h->ack == get48(ck + 1) && dccp_seq_delta(h->seq, get48(ck + 7)) >= 1 &&
			dccp_seq_delta(h->seq, get48(ck + 7)) <= 64;
	}
	if (!co)
		good = cookieless_ack(l, ph_in, h, now_ns, ck);
	uint64_t mac_seen = 0;
	if (good) {
		memcpy(&mac_seen, ck + 20, 8);
		for (unsigned i = 0; i < 256; i++)
			if (l->used[i].t_ns && l->used[i].mac == mac_seen &&
			    now_ns - l->used[i].t_ns <= (DCCP_COOKIE_LIFE_S + 1) * 1000 * MS) {
				l->replays++;
				return false; /* the connection exists already, or did: drop */
			}
	}
	if (!good) {
		l->bad_cookies++;
		l_reply(l, h, DCCP_RESET, h->has_ack ? dccp_seq_add(h->ack, 1) : 0, NULL, 0,
			co ? DCCP_RESET_BAD_INIT_COOKIE : DCCP_RESET_NO_CONNECTION, ph_out, udp,
			emitfn, emit_arg);
		return false;
	}
	/* The handshake is complete: only now does a connection exist. */
	l->used[l->used_next].mac = mac_seen;
	l->used[l->used_next].t_ns = now_ns ? now_ns : 1;
	l->used_next = (l->used_next + 1) % 256;
	struct dccp_conn_params p = l->p;
	p.udp = udp;
	p.sport = h->dport;
	p.dport = h->sport;
	p.ph_out = *ph_out;
	uint64_t w_rx = (uint64_t)ck[17] << 16 | (uint64_t)ck[18] << 8 | ck[19];
	if (dccp_conn_accept(c, &p, env, h, pkt, &o, get48(ck + 1), get48(ck + 7),
			     w_rx < 32 ? 100 : w_rx, now_ns) < 0) {
		l_reply(l, h, DCCP_RESET, dccp_seq_add(h->ack, 1), NULL, 0, DCCP_RESET_TOO_BUSY,
			ph_out, udp, emitfn, emit_arg);
		return false;
	}
	return true;
}
