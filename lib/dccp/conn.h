/* SPDX-License-Identifier: MIT */
/*
 * conn.h - one DCCP connection's state machine (RFC 4340 §8, conn.c), and
 * the stateless server side of the handshake (Init Cookies, §8.1.4,
 * listener.c).
 *
 * No I/O and no clock: packets come in parsed-ready as bytes with the
 * time, packets go out through env.emit() as complete DCCP packets (the
 * encapsulation, sock.c, adds UDP or hands them to a raw socket).  The
 * same code serves native DCCP and DCCP-UDP: only the pseudo-header the
 * checksum covers differs (NULL for DCCP-UDP, RFC 6773 §3.3).
 */
#ifndef GC_DCCP_CONN_H
#define GC_DCCP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dccp/ccid.h"
#include "dccp/options.h"
#include "dccp/wire.h"

enum dccp_state {
	DCCP_S_CLOSED = 0,
	DCCP_S_LISTEN,
	DCCP_S_REQUEST,
	DCCP_S_RESPOND,
	DCCP_S_PARTOPEN,
	DCCP_S_OPEN,
	DCCP_S_CLOSEREQ,
	DCCP_S_CLOSING,
	DCCP_S_TIMEWAIT,
}; /* same numbers as enum gc_dccp_state */

#define DCCP_COOKIE_LEN 28
#define DCCP_COOKIE_KEY 16   /* crypto_shorthash_KEYBYTES */
#define DCCP_COOKIE_LIFE_S 8 /* a cookie older than this is refused */
#define DCCP_REQUEST_TRIES 7 /* Request retransmissions before giving up */
#define DCCP_RX_QUEUE 1024   /* received payloads held for the application */
#define DCCP_RX_ND 16	     /* runs of the peer's non-data packets between its data */

struct dccp_conn_env {
	/* Send DCCP packet p[0..len) to the peer.  Returns 0 or -errno. */
	int (*emit)(void *arg, const uint8_t *p, size_t len);
	/* Optional (NULL: emit() gets every packet whole).  DCCP-UDP only,
	 * where no checksum of ours covers the payload: a packet with data as
	 * its header hdr[0..hlen) (valid during the call) and the caller's
	 * data[0..dlen) (dccp_conn_send()'s, untouched), so that the payload
	 * goes out from where it is.  Returns 0 or -errno. */
	int (*emitv)(void *arg, const uint8_t *hdr, size_t hlen, const void *data, size_t dlen);
	/* The CCID says our data packet seq arrived / was lost (may be NULL). */
	void (*acked)(void *arg, uint64_t seq);
	void (*lost)(void *arg, uint64_t seq);
	void *arg;
};

struct dccp_conn_params {
	uint8_t ccid; /* 2 or 3 */
	uint32_t service;
	uint32_t mps;	     /* largest payload */
	uint64_t seq_window; /* our Sequence Window (for our numbers), >= 32 */
	uint32_t ack_ratio;  /* the Ack Ratio our sender asks for (0: its CCID's choice), ccid.h */
	uint16_t sport, dport;
	bool udp;		   /* DCCP-UDP: checksum 0 (the pseudo-header is unused) */
	struct dccp_pseudo ph_out; /* src = us, dst = peer (native checksum) */
};

struct dccp_rxpkt {
	uint64_t seq, lost;
	uint32_t len;
	uint8_t *data;
};

struct dccp_conn_stats {
	uint64_t sent, received, rx_lost, syncs, invalid, resets_rx;
	/* Changes the sender CCID decided for a feature it negotiates itself,
	 * Ack Ratio (conn.c ccid_feature_update()) */
	uint64_t ack_ratio_changes;
	uint8_t reset_code_rx, reset_code_tx;
};

struct dccp_conn {
	enum dccp_state state;
	bool server;
	struct dccp_conn_params p;
	struct dccp_conn_env env;
	struct dccp_seqstate s;
	struct dccp_sync_limit sync_limit;
	struct dccp_counters err;
	struct dccp_conn_stats st;
	/* CCIDs: tx for our data, rx for the peer's */
	const struct dccp_ccid_tx_ops *txo;
	const struct dccp_ccid_rx_ops *rxo;
	void *tx, *rx;
	/* timers (CLOCK_MONOTONIC ns; 0: off) */
	uint64_t t_retx, t_close, t_ack;
	/* the latest now_ns an entry point was given: the connection's clock
	 * never goes back (conn_clock()), though callers may pass a time taken
	 * before they waited for the connection's lock */
	uint64_t now_max;
	uint64_t backoff_ns;
	unsigned tries;
	uint64_t req_at;	/* client: when our latest Request (seq gss) went */
	uint64_t last_valid_ns; /* a valid packet arrived then (§7.5.3 "active") */
	/* NDP Count (§7.7): our run of non-data packets; the peer's last data seq */
	uint64_t ndp_run;
	bool rx_any;
	uint64_t rx_last_data;
	/* the peer's sequence numbers after rx_last_data known not to be data:
	 * its non-data packets that arrived, with the runs their NDP Counts name
	 * (offsets from rx_last_data, [lo, hi]); full: the rest is unknown */
	struct {
		uint64_t lo, hi;
	} rx_nd[DCCP_RX_ND + 1]; /* + the run before a data packet */
	unsigned rx_nd_n;
	/* Sequence Window/A negotiation: the value of our pending Change L (0: none) */
	uint64_t seqwin_pending;
	uint64_t fgsr, fgss;
	/* features the peer asked us to confirm on our next packet */
	uint8_t confirm_buf[64];
	size_t confirm_len;
	/* The first confirm_partopen bytes of confirm_buf answer the Response's
	 * Changes: in PARTOPEN they go on every Ack and DataAck (not once), as
	 * the server's handshake completes on whichever of them arrives first,
	 * and Linux resets a connection whose first one lacks them (its
	 * features are not all confirmed: Reset "Too Busy"). */
	size_t confirm_partopen;
	/* the server's Init Cookie, echoed on every packet in PARTOPEN (§8.1.4) */
	uint8_t cookie[253];
	uint8_t cookie_len;
	/* received data, for the application (ring of DCCP_RX_QUEUE) */
	struct dccp_rxpkt rxq[DCCP_RX_QUEUE];
	unsigned rxq_head, rxq_n;
	uint64_t rx_dropped; /* queue full: the payload was thrown away (counted as lost) */
	bool peer_closed;
	/* Timestamp Echo (RFC 4340 §13.3): the peer's last Timestamp not yet
	 * echoed, and when it arrived; it goes on our next packet */
	bool ts_pending;
	uint32_t ts_val;
	uint64_t ts_at;
	/* Acks of Acks (§11.4): the Acknowledgement Number each of our recent
	 * feedback Acks carried, by its own sequence number */
	struct dccp_aoa_map aoa;
};

/* Client: set up c and send the Request (state REQUEST).  -errno on failure. */
int dccp_conn_connect(struct dccp_conn *c, const struct dccp_conn_params *p,
		      const struct dccp_conn_env *env, uint64_t iss, uint64_t now_ns);

/* Feed one received DCCP packet (its checksum already checked: ph/UDP).
 * Returns true if the packet was accepted. */
bool dccp_conn_input(struct dccp_conn *c, const uint8_t *pkt, size_t len, const struct dccp_hdr *h,
		     uint64_t now_ns);

/* Run the timers due at now_ns; return the next one (0: none). */
uint64_t dccp_conn_timer(struct dccp_conn *c, uint64_t now_ns);
uint64_t dccp_conn_next_timer(const struct dccp_conn *c);

/* How many data packets the CCID lets go now (wake: see ccid.h). */
uint32_t dccp_conn_budget(struct dccp_conn *c, uint64_t now_ns, uint64_t *wake_ns);
/* Send one data packet; *seq gets its sequence number.  -ENOTCONN when not
 * in PARTOPEN/OPEN (nothing sent), else emit()'s result (the number is used
 * even when emit() failed: the peer sees a loss). */
int dccp_conn_send(struct dccp_conn *c, const void *data, size_t len, uint64_t now_ns, uint64_t *seq);
/* Active close (Close; server: CloseReq).  Ends in CLOSED or TIMEWAIT. */
void dccp_conn_close(struct dccp_conn *c, uint64_t now_ns);
/* Abort with a Reset (code). */
void dccp_conn_reset(struct dccp_conn *c, uint8_t code, uint64_t now_ns);
void dccp_conn_free(struct dccp_conn *c);

/* Pop the oldest received payload (false: none).  The data is the caller's to free(). */
bool dccp_conn_pop(struct dccp_conn *c, struct dccp_rxpkt *out);

/* ---- what listener.c takes from conn.c ---------------------------------- */

/* §8.5 step 2 as RFC 5596 §3.1 updates it: no Reset to a Reset, nor to a
 * DCCP-Listen (Linux 6.1 drops type 10 as unknown, silently) */
static inline bool dccp_draws_reset(uint8_t type)
{
	return type != DCCP_RESET && type != DCCP_LISTEN;
}

/* NN features the peer changed or confirmed in one packet (0: not there),
 * and its Changes of the other NN features at it, for the receiver CCID
 * (the last value of each). */
#define DCCP_NN_PEER 4
struct dccp_nn_seen {
	uint64_t peer_seqwin, our_seqwin_confirmed;
	struct {
		uint8_t feat;
		uint64_t value;
	} peer[DCCP_NN_PEER];
	unsigned npeer;
};

/*
 * Answer the peer's Change options in o into out (Confirms), note the NN
 * values in nn, and hand the Confirms of our features to the sender CCID
 * (txo/tx; NULL: none yet).  pending: the value of our Sequence Window
 * Change awaiting its Confirm (0: none).  false: a Reset is needed (*reset).
 */
bool dccp_conn_features(const struct dccp_opts *o, struct dccp_obuf *out, uint8_t our_ccid,
			struct dccp_nn_seen *nn, uint64_t pending, const struct dccp_ccid_tx_ops *txo,
			void *tx, uint8_t *reset, struct dccp_counters *err);
/* Change R(Send NDP Count, 1) (§7.7.2): on the client's Request and the listener's Response. */
void dccp_conn_put_ndp_change(struct dccp_obuf *b);
/*
 * The handshake completed at the listener (Ack or DataAck h with a valid
 * Init Cookie, its options o): set c up as an OPEN server connection with
 * params p (ports, pseudo-header and encapsulation of this peer), our ISS,
 * the peer's ISR and its Sequence Window w_rx; deliver a DataAck's payload
 * and send the Ack that ends the client's PARTOPEN.  -errno (c freed) if the
 * CCIDs could not start.
 */
int dccp_conn_accept(struct dccp_conn *c, const struct dccp_conn_params *p,
		     const struct dccp_conn_env *env, const struct dccp_hdr *h, const uint8_t *pkt,
		     const struct dccp_opts *o, uint64_t iss, uint64_t isr, uint64_t w_rx,
		     uint64_t now_ns);

/* ---- the stateless listener (§8.1.4 Init Cookie, listener.c) ------------ */

#define DCCP_RL_BUCKETS 64

struct dccp_listener {
	uint8_t key[DCCP_COOKIE_KEY];
	struct dccp_conn_params p; /* ccid, service, mps, seq_window; sport = our port */
	struct dccp_counters err;
	uint64_t requests, responses, bad_cookies, resets;
	/* Response budget per source: sources hash (keyed) onto 64 buckets
	 * that each allow per_source_rate Responses a second, shared by the
	 * sources that collide there.  A flood from one address costs one
	 * bucket, and Requests spoofed from any number of addresses get at most
	 * 64 * per_source_rate Responses a second in all (no per-connection
	 * state; a bucket is never handed to a newcomer, which would let two
	 * colliding sources reset each other's count). */
	struct {
		uint64_t window_ns;
		unsigned n;
	} rl[DCCP_RL_BUCKETS];
	unsigned per_source_rate; /* Responses per source (bucket) per second */
	/* MACs of the cookies that opened connections in the last
	 * DCCP_COOKIE_LIFE_S: a replayed Ack opens nothing (state kept only
	 * for handshakes that completed) */
	struct {
		uint64_t mac, t_ns;
	} used[256];
	unsigned used_next;
	uint64_t replays;
};

/* A fresh listener with a random key. */
void dccp_listener_init(struct dccp_listener *l, const struct dccp_conn_params *p);

/*
 * A packet for the listener from peer (ph_in: src = peer, dst = us; ph_out
 * its mirror).  Answers Requests with a Response carrying an Init Cookie,
 * other packets with a Reset, through emit.  When an Ack/DataAck carries a
 * valid cookie, fills *c as an OPEN server connection (its first packet,
 * a DataAck's payload, already delivered) and returns true.
 */
bool dccp_listener_input(struct dccp_listener *l, const uint8_t *pkt, size_t len,
			 const struct dccp_hdr *h, const struct dccp_pseudo *ph_in,
			 const struct dccp_pseudo *ph_out, bool udp, uint64_t now_ns,
			 int (*emit)(void *arg, const uint8_t *p, size_t len), void *emit_arg,
			 struct dccp_conn *c, const struct dccp_conn_env *env);

#endif
