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
