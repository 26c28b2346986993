/* SPDX-License-Identifier: MIT */
/*
 * DCCP feature negotiation values, library-internal (feature.c).  The
 * per-feature STABLE/CHANGING/UNSTABLE state machine of RFC 4340 §6.6.2
 * belongs to the connection; this is what it needs from the wire: the
 * feature table, encoding and decoding of Change/Confirm L/R, server-
 * priority reconciliation and the reordering test.
 */
#ifndef GC_DCCP_FEATURE_H
#define GC_DCCP_FEATURE_H

#include "dccp/options.h"

enum dccp_feat {
	DCCP_F_CCID = 1,
	DCCP_F_SHORT_SEQNOS = 2,
	DCCP_F_SEQ_WINDOW = 3,
	DCCP_F_ECN_INCAPABLE = 4,
	DCCP_F_ACK_RATIO = 5,
	DCCP_F_SEND_ACK_VECTOR = 6,
	DCCP_F_SEND_NDP_COUNT = 7,
	DCCP_F_MIN_CSCOV = 8,
	DCCP_F_CHECK_DATA_CSUM = 9,
	DCCP_F_SEND_LOSS_EVENT_RATE = 192, /* CCID 3 (RFC 4342 §8.4) */
};

enum dccp_rule {
	DCCP_RULE_SP, /* server-priority: preference lists of 1-byte values (§6.3.1) */
	DCCP_RULE_NN, /* non-negotiable: one value, sent by the feature location (§6.3.2) */
};

struct dccp_feat_info {
	uint8_t num;
	enum dccp_rule rule;
	uint8_t len;	   /* bytes per value */
	uint64_t initial;  /* §6.4 Table 4 */
	uint64_t min, max; /* valid values (NN); SP lists may hold any byte */
	bool required;	   /* every DCCP must understand it */
	const char *name;
};

/* The table entry for feature num, or NULL if this implementation does not know it. */
const struct dccp_feat_info *dccp_feat_info(uint8_t num);

/* A decoded Change/Confirm option. */
struct dccp_feat_opt {
	uint8_t type; /* DCCP_OPT_CHANGE_L ... DCCP_OPT_CONFIRM_R */
	uint8_t feat;
	bool mandatory;
	bool empty;	      /* Confirm with no value: feature not understood or value refused */
	uint64_t value;	      /* NN value, or the value a Confirm selected */
	const uint8_t *prefs; /* SP: the sender's preference list (Change: all values) */
	uint8_t nprefs;
};

/*
 * Decode a Change/Confirm option (already length-checked by dccp_opts_parse).
 * DCCP_DROP_FEAT_UNKNOWN: answer a Change with an empty Confirm (or Reset 6 if
 * mandatory), ignore a Confirm (§6.6.7).  DCCP_DROP_FEAT_INVALID: wrong value
 * length, NN value out of range, or Change R / Confirm L for an NN feature
 * (§6.3.2, §6.6.8): empty Confirm for a Change, Reset 5 for a Confirm.
 * Counted in c.
 */
enum dccp_drop dccp_feat_decode(const struct dccp_opt *op, struct dccp_feat_opt *f,
				struct dccp_counters *c);

/*
 * Server-priority reconciliation (§6.3.1): the first entry of the server's
 * list that also occurs in the client's.  Returns false if none is shared
 * (the value must not change; a Mandatory Change then resets, §6.6.9).
 */
bool dccp_feat_reconcile(const uint8_t *server, size_t ns, const uint8_t *client, size_t nc,
			 uint8_t *out);

/*
 * Is a received Confirm for an SP feature consistent with the Change we sent
 * (§6.6.8: a Confirm selecting the wrong value is invalid)?  ours: the
 * preference list of our Change; we_are_server: which list has priority;
 * current: the feature's value before the negotiation, which the Confirm
 * must repeat when the lists share nothing.  For an NN feature (ours
 * unused), current is the value of our Change L, which the Confirm R repeats.
 */
bool dccp_feat_confirm_ok(const struct dccp_feat_opt *f, const uint8_t *ours, size_t n,
			  bool we_are_server, uint64_t current);

/*
 * Reordering protection (§6.6.4, connection-wide FGSR/FGSS): may the
 * feature options of a valid packet with this seq/ack be processed?
 * Change options need seq > FGSR; Confirm options also need an
 * Acknowledgement Number >= FGSS.
 */
bool dccp_feat_in_order(uint8_t opt_type, uint64_t seq, bool has_ack, uint64_t ack, uint64_t fgsr,
			uint64_t fgss);

/* Builders.  SP: values[0..n) is the preference list (Change) or, for a
 * Confirm, values[0] is the selected value followed by the preference list.
 * NN: one value, written in the feature's length.  Empty Confirm: n == 0. */
void dccp_feat_put_sp(struct dccp_obuf *b, uint8_t type, uint8_t feat, const uint8_t *values, size_t n);
void dccp_feat_put_nn(struct dccp_obuf *b, uint8_t type, uint8_t feat, uint64_t value);
void dccp_feat_put_empty_confirm(struct dccp_obuf *b, uint8_t type, uint8_t feat);

#endif /* GC_DCCP_FEATURE_H */
