// SPDX-License-Identifier: MIT
#include "shim.h"

static struct gc_dccp_opts opts_of(const struct gcgo_cfg *c)
{
	struct gc_dccp_opts o = GC_DCCP_OPTS_INIT(.ccid = c->ccid, .encap = c->encap,
						  .service = c->service, .mps = c->mps,
						  .ring_slots = c->ring_slots,
						  .timeout_ms = c->timeout_ms);
	return o;
}

struct gc_dccp *gcgo_connect(const struct gcgo_cfg *c, struct gcgo_err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl = gcgo_sockaddr(&c->where, &ss);
	struct gc_dccp_opts o = opts_of(c);
	struct gc_dccp *d = gc_dccp_connect((struct sockaddr *)&ss, sl, &o);
	if (!d)
		gcgo_fail(e);
	return d;
}

struct gc_dccp_listener *gcgo_listen(const struct gcgo_cfg *c, struct gcgo_err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl = gcgo_sockaddr(&c->where, &ss);
	struct gc_dccp_opts o = opts_of(c);
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&ss, sl, &o);
	if (!l)
		gcgo_fail(e);
	return l;
}

struct gc_dccp *gcgo_accept(struct gc_dccp_listener *l, int timeout_ms, struct gcgo_err *e)
{
	struct gc_dccp *d = gc_dccp_accept(l, timeout_ms);
	if (!d)
		gcgo_fail(e);
	return d;
}

ssize_t gcgo_recv(struct gc_dccp *c, void *buf, size_t len, uint64_t *seq, uint64_t *lost, int *eof,
		  int timeout_ms, struct gcgo_err *e)
{
	struct gc_dccp_rxinfo ri = { 0 };
	ssize_t n = gc_dccp_recv(c, buf, len, &ri, timeout_ms);
	if (n < 0)
		return gcgo_fail(e);
	*seq = ri.seq;
	*lost = ri.lost;
	*eof = ri.eof;
	return n;
}

int gcgo_write(struct gc_dccp *c, const void *buf, size_t len, uint64_t seq, unsigned *pos,
	       struct gcgo_err *e)
{
	struct gc_ring *r = gc_dccp_ring(c);
	struct gc_zone *z = gc_dccp_zone(c);
	struct gc_pkt *p = gc_ring_get_pkt(r);
	if (!p) {
		int err = errno;
		gc_ring_submit(r);
		errno = err;
		return gcgo_fail(e);
	}
	/* one zone buffer per ring slot (zone_bufs defaults to ring_slots) */
	*pos = gc_ring_pos(r, p);
	void *b = gc_zone_buf(z, *pos);
	if (len)
		memcpy(b, buf, len);
	p->off = gc_zone_offset(z, b);
	p->len = (uint32_t)len;
	p->user_seq = seq;
	return gc_ring_submit(r) < 0 ? gcgo_fail(e) : 0;
}

int gcgo_wait(struct gc_dccp *c, int timeout_ms, struct gcgo_err *e)
{
	return gc_ring_wait(gc_dccp_ring(c), 1, timeout_ms) == 0 ? 0 : gcgo_fail(e);
}

int gcgo_drop(struct gc_dccp *c, uint64_t *queued, unsigned n, uint64_t cutoff, struct gcgo_err *e)
{
	struct gc_ring *r = gc_dccp_ring(c);
	unsigned first;
	int m = gc_ring_rewind(r, GC_RING_OLDEST, &first), dropped = 0;
	if (m < 0)
		return gcgo_fail(e);
	for (int k = 0; k < m; k++) {
		unsigned pos = (first + (unsigned)k) % n;
		if (queued[pos] && queued[pos] < cutoff) {
			dropped += gc_ring_mark_dead(r, pos) == 1;
			queued[pos] = 0;
		}
	}
	if (gc_ring_submit(r) < 0)
		return gcgo_fail(e);
	return dropped;
}

unsigned gcgo_entries(struct gc_dccp *c)
{
	return gc_ring_entries(gc_dccp_ring(c));
}

int gcgo_stats(struct gc_dccp *c, struct gcgo_dccp_stats *out, struct gcgo_err *e)
{
	struct gc_dccp_stats st = GC_DCCP_STATS_INIT();
	if (gc_dccp_stats(c, &st) != 0)
		return gcgo_fail(e);
	*out = (struct gcgo_dccp_stats){ st.state,    st.ccid,	  st.cwnd,   st.pipe, st.x_bps,
					 st.rtt_us,   st.sent,	  st.acked,  st.lost, st.dead,
					 st.received, st.rx_lost, st.invalid };
	return 0;
}

int gcgo_close(struct gc_dccp *c, int timeout_ms, struct gcgo_err *e)
{
	return gc_dccp_close(c, timeout_ms) == 0 ? 0 : gcgo_fail(e);
}
