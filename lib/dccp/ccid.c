/* SPDX-License-Identifier: MIT */
/*
 * The CCID registry: which congestion controls this library implements
 * (ccid.h).
 */
#include "dccp/ccid.h"
#include "dccp/ccid2.h"
#include "dccp/ccid3.h"

const struct dccp_ccid_tx_ops *dccp_ccid_tx(uint8_t id)
{
	switch (id) {
	case DCCP_CCID2: return &dccp_ccid2_tx_ops;
	case DCCP_CCID3: return &dccp_ccid3_tx_ops;
	default: return NULL;
	}
}

const struct dccp_ccid_rx_ops *dccp_ccid_rx(uint8_t id)
{
	switch (id) {
	case DCCP_CCID2: return &dccp_ccid2_rx_ops;
	case DCCP_CCID3: return &dccp_ccid3_rx_ops;
	default: return NULL;
	}
}

void dccp_aoa_note(struct dccp_aoa_map *m, uint64_t seq, uint64_t ackno)
{
	m->e[m->next].seq = seq & DCCP_SEQ_MASK;
	m->e[m->next].ackno = ackno & DCCP_SEQ_MASK;
	m->e[m->next].used = true;
	m->next = (m->next + 1) % DCCP_AOA_N;
}

bool dccp_aoa_find(struct dccp_aoa_map *m, uint64_t seq, uint64_t *carried)
{
	seq &= DCCP_SEQ_MASK;
	for (unsigned i = 0; i < DCCP_AOA_N; i++) {
		if (!m->e[i].used || m->e[i].seq != seq)
			continue;
		*carried = m->e[i].ackno;
		/* this one and those sent before it are answered */
		for (unsigned k = 0; k < DCCP_AOA_N; k++)
			if (m->e[k].used && !dccp_seq_after(m->e[k].seq, seq))
				m->e[k].used = false;
		return true;
	}
	return false;
}
