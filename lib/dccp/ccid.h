/* SPDX-License-Identifier: MIT */
/*
 * ccid.h - congestion control IDs as half-connection modules (RFC 4340 §10).
 *
 * A DCCP connection (conn.c) has two half-connections.  On the one that
 * sends our data we run a CCID's sender side (HC-Sender), on the one that
 * carries the peer's data its receiver side (HC-Receiver).  The modules do
 * no I/O and read no clock: the connection passes the time in, asks them
 * what to do, and writes the options they produce into the packets it
 * builds.
 *
 *   ccid2.c   CCID 2, TCP-like (RFC 4341): window in packets, Ack Vectors,
 *             Ack Ratio
 *   ccid3.c   CCID 3, TFRC (RFC 4342, RFC 5348): rate, Loss Intervals,
 *             Receive Rate, the nofeedback timer (uses tfrc.c)
 *
 * Sequence numbers are 48-bit (wire.h); times are CLOCK_MONOTONIC ns.
 */
#ifndef GC_DCCP_CCID_H
#define GC_DCCP_CCID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dccp/options.h"

enum { DCCP_CCID2 = 2, DCCP_CCID3 = 3 };

/* What a module needs from its connection, fixed at init. */
struct dccp_ccid_env {
	uint32_t mps;	   /* maximum packet size: the largest payload, bytes */
	uint64_t iss, isr; /* initial sequence numbers (ours, the peer's) */
	uint64_t now_ns;
	/* The handshake's round trip, Request to Response, when the client
	 * timed it (0: none; the server, whose listener keeps no state until
	 * the Ack, has none).  CCID 2 takes it as its first RTT sample, as TCP
	 * takes its SYN's (RFC 6298 (2.2)), so its first RTO is not 1 s; CCID 3
	 * runs its window counter (CCVal) on it until the first feedback. */
	uint64_t hs_rtt_ns;
	/* The Ack Ratio the application asked for (gc_dccp_opts.ack_ratio),
	 * for a CCID that has one (CCID 2); 0: the CCID's own choice. */
	uint32_t ack_ratio;
	/*
	 * The sender learned that the peer received our packet seq (from an
	 * Ack Vector, or an Acknowledgement Number where the CCID defines it
	 * so).  Called once per packet; the connection maps seq back to the
	 * ring packet it carried (gc_flow_ack()).  May be NULL.
	 */
	void (*acked)(void *arg, uint64_t seq);
	/* ...or that it was lost (reported once, never after acked). */
	void (*lost)(void *arg, uint64_t seq);
	void *arg;
};

/* Sender statistics (struct gc_dccp_stats takes them as they are). */
struct dccp_ccid_tx_stats {
	uint32_t cwnd;	 /* CCID 2: window, packets; CCID 3: 0 */
	uint32_t pipe;	 /* packets in flight */
	uint64_t x_bps;	 /* CCID 3: allowed rate, bytes/s; CCID 2: 0 */
	uint64_t rtt_ns; /* smoothed RTT (0: none yet) */
	double p;	 /* loss event rate (CCID 3), or losses/sent (CCID 2) */
	uint64_t lost;	 /* packets the sender took as lost */
};

/* What a sender's feature_update() decided (Change L of a feature of ours). */
enum dccp_ccid_change {
	DCCP_CCID_CHANGE_NONE = 0,
	DCCP_CCID_CHANGE_DUE, /* a Change is due: it rides on our next packet with an Ack */
	DCCP_CCID_CHANGE_NOW, /* ...and an Ack of its own should carry it at once */
};

struct dccp_ccid_tx_ops {
	uint8_t id;
	void *(*init)(const struct dccp_ccid_env *env); /* NULL: ENOMEM */
	void (*free)(void *tx);
	/*
	 * How many data packets may go now.  0: none; ask again at *wake_ns
	 * (0: when an acknowledgement arrives).  CCID 3 releases packets one
	 * at a time at its send interval.
	 */
	uint32_t (*budget)(void *tx, uint64_t now_ns, uint64_t *wake_ns);
	/*
	 * Packet seq went out: a data packet of len payload bytes (data) or
	 * a pure Ack/Sync/... (!data).  *ccval is the CCVal to put in its
	 * header (CCID 3's window counter; CCID 2 leaves it 0).
	 */
	void (*sent)(void *tx, uint64_t seq, size_t len, bool data, uint64_t now_ns, uint8_t *ccval);
	/*
	 * A packet with an Acknowledgement Number arrived from the peer (the
	 * connection checked it against §7.5 first): ackno and its options.
	 */
	void (*recv_ack)(void *tx, uint64_t ackno, const struct dccp_opts *o, uint64_t now_ns);
	/* Timer: the next time the module must be called at (0: none), and the call. */
	uint64_t (*next_timer)(void *tx);
	void (*timer)(void *tx, uint64_t now_ns);
	/*
	 * The Sequence Window the sender wants the peer to use for our
	 * numbers (CCID 2 keeps it near 5 x cwnd, RFC 4341 §6.1.1); 0: no
	 * opinion.  The connection negotiates it with Change L when it moves
	 * by more than a factor of 2.
	 */
	uint64_t (*seq_window)(void *tx);
	void (*stats)(void *tx, struct dccp_ccid_tx_stats *st);
	/*
	 * The hooks below are optional (NULL: the CCID has no use for them).
	 *
	 * Features the sender negotiates itself (RFC 4340 §6.6; CCID 2's Ack
	 * Ratio, RFC 4341 §6.1.2, which sits at the HC-Sender).  The
	 * connection calls feature_update() in OPEN once data went, after each
	 * acknowledgement (rto false) and after each timer() it ran (rto
	 * true); peer_window is the peer's Sequence Window for its own
	 * numbers.  While feature_due() says so, the connection's next packet
	 * with an Acknowledgement Number carries the Change L that
	 * feature_take() hands over (once).  feature_confirmed(): the peer
	 * sent Confirm R(feat, value) with a value, in order (§6.6.4).
	 */
	enum dccp_ccid_change (*feature_update)(void *tx, uint64_t peer_window, bool rto, uint64_t now_ns);
	bool (*feature_due)(void *tx);
	bool (*feature_take)(void *tx, uint8_t *feat, uint64_t *value);
	void (*feature_confirmed)(void *tx, uint8_t feat, uint64_t value);
	/*
	 * The connection saw n of the peer's Acks missing in OPEN: a gap in
	 * the sequence numbers before one of its Acks (RFC 4341 §6.1.2).
	 */
	void (*acks_lost)(void *tx, uint64_t n);
	/*
	 * The connection ends (CLOSED or TIMEWAIT): no acknowledgement can
	 * come any more.
	 */
	void (*finish)(void *tx);
};

struct dccp_ccid_rx_ops {
	uint8_t id;
	void *(*init)(const struct dccp_ccid_env *env);
	void (*free)(void *rx);
	/*
	 * A packet from the peer passed the connection's checks: its type,
	 * sequence number, CCVal, NDP Count option (o), payload length.
	 * Returns true when an acknowledgement should go now (CCID 2: Ack
	 * Ratio reached; CCID 3: feedback due, a new loss event).
	 */
	bool (*recv)(void *rx, uint8_t type, uint64_t seq, uint8_t ccval, const struct dccp_opts *o,
		     size_t len, uint64_t now_ns);
	/*
	 * Write the feedback options for an Ack or DataAck the connection is
	 * about to send (Ack Vector; CCID 3's Loss Intervals, Receive Rate,
	 * Elapsed Time...).  *ackno is set to the Acknowledgement Number to
	 * carry (GSR for both CCIDs).
	 */
	void (*put_feedback)(void *rx, struct dccp_obuf *b, uint64_t now_ns, uint64_t *ackno);
	/* The peer received our Ack that carried Acknowledgement Number seq
	 * (Ack of Ack, §11.4; dccp_aoa_find() maps the peer's Acknowledgement
	 * Number to it): state below seq may go. */
	void (*ack_of_ack)(void *rx, uint64_t seq);
	uint64_t (*next_timer)(void *rx);
	void (*timer)(void *rx, uint64_t now_ns); /* may make feedback due: see feedback_due */
	bool (*feedback_due)(void *rx);
	/*
	 * Optional: the peer's Change L(feat, value) of an NN feature located
	 * at it other than Sequence Window (which the connection keeps), in
	 * order (§6.6.4), the last one of each feature in a packet; the
	 * connection confirms it.  CCID 2: Ack Ratio, which its receiver obeys.
	 */
	void (*feature_changed)(void *rx, uint8_t feat, uint64_t value);
};

/*
 * Acks of Acks (RFC 4340 §11.4, RFC 4341 §6.1.1).  The peer acknowledges
 * one of our feedback packets by its sequence number (the Acknowledgement
 * Number of the peer's packet is a number of ours); ack_of_ack() wants the
 * Acknowledgement Number that feedback packet carried (a number of the
 * peer's).  The connection notes (our seq, ackno carried) for each feedback
 * packet it sends and looks the peer's Acknowledgement Number up: only an
 * exact match says the peer received that Ack (Linux: dccp_ackvec_lookup()).
 * The last DCCP_AOA_N are kept; an older one acknowledged prunes nothing.
 */
#define DCCP_AOA_N 32
struct dccp_aoa_map {
	struct {
		uint64_t seq, ackno;
		bool used;
	} e[DCCP_AOA_N];
	unsigned next;
};
void dccp_aoa_note(struct dccp_aoa_map *m, uint64_t seq, uint64_t ackno);
/* true, *carried set: seq (the peer's Acknowledgement Number) is one of
 * our feedback packets noted; it and the older ones are forgotten. */
bool dccp_aoa_find(struct dccp_aoa_map *m, uint64_t seq, uint64_t *carried);

const struct dccp_ccid_tx_ops *dccp_ccid_tx(uint8_t id); /* NULL: not supported */
const struct dccp_ccid_rx_ops *dccp_ccid_rx(uint8_t id);

#endif
