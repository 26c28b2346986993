/* SPDX-License-Identifier: MIT */
/*
 * DCCP feature negotiation values:
 *   RFC 4340 §6.1-6.2  Change L/R, Confirm L/R (and empty Confirms)
 *   RFC 4340 §6.3      reconciliation: server-priority (§6.3.1), non-negotiable (§6.3.2)
 *   RFC 4340 §6.4      feature numbers, initial values; §7.5.2 Sequence Window
 *                      limits, §11.3/§6.6.8 Ack Ratio non-zero, §9.2.1 MinCsCov
 *   RFC 4340 §6.6.4    reordering (FGSR/FGSS); §6.6.7-6.6.9 unknown/invalid options
 *   RFC 4342 §8.4      CCID 3's Send Loss Event Rate (192)
 */
#include <string.h>

#include "dccp/feature.h"

static const struct dccp_feat_info feats[] = {
	{ DCCP_F_CCID, DCCP_RULE_SP, 1, 2, 0, 255, true, "CCID" },
	{ DCCP_F_SHORT_SEQNOS, DCCP_RULE_SP, 1, 0, 0, 1, true, "Allow Short Seqnos" },
	{ DCCP_F_SEQ_WINDOW, DCCP_RULE_NN, 6, 100, 32, (UINT64_C(1) << 46) - 1, true, "Sequence Window" },
	{ DCCP_F_ECN_INCAPABLE, DCCP_RULE_SP, 1, 0, 0, 1, false, "ECN Incapable" },
	/* §6.6.8: "two-byte, non-zero integer values" */
	{ DCCP_F_ACK_RATIO, DCCP_RULE_NN, 2, 2, 1, 0xffff, false, "Ack Ratio" },
	{ DCCP_F_SEND_ACK_VECTOR, DCCP_RULE_SP, 1, 0, 0, 1, false, "Send Ack Vector" },
	{ DCCP_F_SEND_NDP_COUNT, DCCP_RULE_SP, 1, 0, 0, 1, false, "Send NDP Count" },
	{ DCCP_F_MIN_CSCOV, DCCP_RULE_SP, 1, 0, 0, 15, false, "Minimum Checksum Coverage" },
	{ DCCP_F_CHECK_DATA_CSUM, DCCP_RULE_SP, 1, 0, 0, 1, false, "Check Data Checksum" },
	{ DCCP_F_SEND_LOSS_EVENT_RATE, DCCP_RULE_SP, 1, 0, 0, 1, false, "Send Loss Event Rate" },
};

const struct dccp_feat_info *dccp_feat_info(uint8_t num)
{
	for (size_t i = 0; i < sizeof(feats) / sizeof(feats[0]); i++)
		if (feats[i].num == num)
			return &feats[i];
	return NULL;
}

static bool is_change(uint8_t type)
{
	return type == DCCP_OPT_CHANGE_L || type == DCCP_OPT_CHANGE_R;
}

enum dccp_drop dccp_feat_decode(const struct dccp_opt *op, struct dccp_feat_opt *f,
				struct dccp_counters *c)
{
	memset(f, 0, sizeof(*f));
	if (op->type < DCCP_OPT_CHANGE_L || op->type > DCCP_OPT_CONFIRM_R || op->len < 1)
		return dccp_count(c, DCCP_DROP_FEAT_INVALID);
	f->type = op->type;
	f->feat = op->data[0];
	f->mandatory = op->mandatory;
	const struct dccp_feat_info *fi = dccp_feat_info(f->feat);
	if (!fi)
		return dccp_count(c, DCCP_DROP_FEAT_UNKNOWN);
	const uint8_t *v = op->data + 1;
	unsigned n = op->len - 1u;

	/* Change R and Confirm L are never sent for a non-negotiable feature */
	if (fi->rule == DCCP_RULE_NN && (op->type == DCCP_OPT_CHANGE_R || op->type == DCCP_OPT_CONFIRM_L))
		return dccp_count(c, DCCP_DROP_FEAT_INVALID);
	if (n == 0) {
		if (is_change(op->type)) /* a Change carries at least one value */
			return dccp_count(c, DCCP_DROP_FEAT_INVALID);
		f->empty = true;
		return DCCP_OK;
	}
	if (fi->rule == DCCP_RULE_NN) {
		if (n != fi->len)
			return dccp_count(c, DCCP_DROP_FEAT_INVALID);
		for (unsigned i = 0; i < n; i++)
			f->value = f->value << 8 | v[i];
		if (f->value < fi->min || f->value > fi->max)
			return dccp_count(c, DCCP_DROP_FEAT_INVALID);
		return DCCP_OK;
	}
	/* server-priority: 1-byte values; any byte is acceptable in a list */
	if (is_change(op->type)) {
		f->prefs = v;
		f->nprefs = (uint8_t)n;
	} else {
		f->value = v[0];
		f->prefs = v + 1;
		f->nprefs = (uint8_t)(n - 1);
	}
	return DCCP_OK;
}

bool dccp_feat_reconcile(const uint8_t *server, size_t ns, const uint8_t *client, size_t nc, uint8_t *out)
{
	for (size_t i = 0; i < ns; i++)
		for (size_t j = 0; j < nc; j++)
			if (server[i] == client[j]) {
				*out = server[i];
				return true;
			}
	return false;
}

bool dccp_feat_confirm_ok(const struct dccp_feat_opt *f, const uint8_t *ours, size_t n,
			  bool we_are_server, uint64_t current)
{
	const struct dccp_feat_info *fi = dccp_feat_info(f->feat);
	uint8_t v;

	if (!fi || f->empty || is_change(f->type))
		return false;
	if (fi->rule == DCCP_RULE_NN) /* the remote must accept any valid value */
		return f->value == current;
	bool shared = we_are_server ? dccp_feat_reconcile(ours, n, f->prefs, f->nprefs, &v)
				    : dccp_feat_reconcile(f->prefs, f->nprefs, ours, n, &v);
	/* with nothing shared, the Confirm repeats the feature's previous value */
	return f->value == (shared ? v : current);
}

bool dccp_feat_in_order(uint8_t opt_type, uint64_t seq, bool has_ack, uint64_t ack, uint64_t fgsr,
			uint64_t fgss)
{
	if (!dccp_seq_after(seq, fgsr))
		return false;
	if (is_change(opt_type))
		return true;
	return has_ack && !dccp_seq_before(ack, fgss);
}

void dccp_feat_put_sp(struct dccp_obuf *b, uint8_t type, uint8_t feat, const uint8_t *values, size_t n)
{
	uint8_t d[253];

	if (n == 0 || n > 252 || type < DCCP_OPT_CHANGE_L || type > DCCP_OPT_CONFIRM_R) {
		b->overflow = true;
		return;
	}
	d[0] = feat;
	memcpy(d + 1, values, n);
	dccp_opt_put(b, type, d, 1 + n);
}

void dccp_feat_put_nn(struct dccp_obuf *b, uint8_t type, uint8_t feat, uint64_t value)
{
	const struct dccp_feat_info *fi = dccp_feat_info(feat);
	uint8_t d[9];

	if (!fi || fi->rule != DCCP_RULE_NN || value < fi->min || value > fi->max ||
	    (type != DCCP_OPT_CHANGE_L && type != DCCP_OPT_CONFIRM_R)) {
		b->overflow = true;
		return;
	}
	d[0] = feat;
	for (unsigned i = fi->len; i > 0; i--, value >>= 8)
		d[i] = (uint8_t)value;
	dccp_opt_put(b, type, d, 1u + fi->len);
}

void dccp_feat_put_empty_confirm(struct dccp_obuf *b, uint8_t type, uint8_t feat)
{
	if (type != DCCP_OPT_CONFIRM_L && type != DCCP_OPT_CONFIRM_R) {
		b->overflow = true;
		return;
	}
	dccp_opt_put(b, type, &feat, 1);
}
