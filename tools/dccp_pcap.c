/* SPDX-License-Identifier: MIT */
/*
 * dccp_pcap: DCCP connections built with lib/dccp's builders, written as a
 * classic pcap (LINKTYPE_RAW: IPv4/IPv6 packets) for tshark to judge
 * (tests/e2e/test_dccp_wire.py), with a JSON manifest of what each frame
 * should decode to, and optionally as seeds for fuzz/dccp_fuzz.c.
 *
 *   dccp_pcap OUT.pcap MANIFEST.json [CORPUS_DIR]
 *
 * One conversation (Listen, Request/Response/Ack with feature negotiation
 * and an Init Cookie, data both ways with Ack Vector, Data Dropped,
 * Timestamp/Echo/Elapsed Time, NDP Count, Data Checksum, CCID 3 feedback,
 * 24-bit sequence numbers and partial checksum coverage, Sync/SyncAck,
 * CloseReq/Close/Reset) is written four times: native DCCP (IP protocol 33)
 * and DCCP-UDP (RFC 6773, UDP port 6511), each over IPv4 and IPv6.  The
 * server's initial sequence number sits just below 2^48, so its numbers wrap.
 * Nothing is sent anywhere: the addresses only appear in the file.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dccp/feature.h"
#include "dccp/options.h"
#include "dccp/wire.h"

/* fuzz/dccp_fuzz.c reads the same first byte */
#define SEED_V6 0x01
#define SEED_ESTABLISHED 0x02
#define SEED_UDP 0x08

struct flow {
	int family;
	bool udp;
	uint8_t a[16], b[16]; /* client, server */
	uint16_t ua, ub;      /* UDP ports (DCCP-UDP) */
};

static FILE *pcap, *manifest;
static const char *corpus;
static unsigned frame;

static void die(const char *what)
{
	fprintf(stderr, "dccp_pcap: %s: %s\n", what, strerror(errno ? errno : EINVAL));
	exit(1);
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

static void pcap_record(const uint8_t *p, size_t len)
{
	uint32_t rec[4] = { 1700000000u + frame, frame * 1000u, (uint32_t)len, (uint32_t)len };

	if (fwrite(rec, sizeof(rec), 1, pcap) != 1 || fwrite(p, len, 1, pcap) != 1)
		die("writing the pcap");
}

static void seed(const uint8_t *p, size_t len, uint8_t flags)
{
	char path[4096];
	FILE *f;

	if (!corpus)
		return;
	snprintf(path, sizeof(path), "%s/seed-%03u", corpus, frame);
	if (!(f = fopen(path, "wb")) || fwrite(&flags, 1, 1, f) != 1 || fwrite(p, len, 1, f) != 1 ||
	    fclose(f) != 0)
		die(path);
}

/* The manifest entry for one frame: type, numbers, every option type in the
 * order the bytes hold them, and each Change/Confirm as [option type,
 * feature number, [value bytes]]. */
static void describe(const struct flow *fl, const struct dccp_hdr *h, const uint8_t *o, size_t n)
{
	fprintf(manifest,
		"%s{\"frame\": %u, \"family\": %d, \"udp\": %s, \"type\": %u, \"x\": %d, "
		"\"seq\": %llu, \"cscov\": %u, ",
		frame > 1 ? ",\n " : "", frame, fl->family == AF_INET6 ? 6 : 4,
		fl->udp ? "true" : "false", h->type, h->x, (unsigned long long)h->seq, h->cscov);
	if (dccp_type_has_ack(h->type))
		fprintf(manifest, "\"ack\": %llu, ", (unsigned long long)h->ack);
	else
		fprintf(manifest, "\"ack\": null, ");
	fprintf(manifest, "\"options\": [");
	for (size_t i = 0; i < n; i += o[i] < 32 ? 1 : o[i + 1])
		fprintf(manifest, "%s%u", i ? ", " : "", o[i]);
	fprintf(manifest, "], \"features\": [");
	bool first = true;
	for (size_t i = 0; i < n; i += o[i] < 32 ? 1 : o[i + 1])
		if (o[i] >= DCCP_OPT_CHANGE_L && o[i] <= DCCP_OPT_CONFIRM_R) {
			fprintf(manifest, "%s[%u, %u, [", first ? "" : ", ", o[i], o[i + 2]);
			for (size_t k = 3; k < o[i + 1]; k++) /* the value bytes */
				fprintf(manifest, "%s%u", k > 3 ? ", " : "", o[i + k]);
			fprintf(manifest, "]]");
			first = false;
		}
	fprintf(manifest, "]}");
}

/* Build one DCCP packet from client (from_a) or server and write it. */
static void emit(const struct flow *fl, bool from_a, struct dccp_hdr *h, struct dccp_obuf *ob,
		 const char *data, bool established)
{
	uint8_t pkt[2048];
	struct dccp_pseudo ph = { .family = fl->family };
	size_t alen = fl->family == AF_INET6 ? 16 : 4, ilen = fl->family == AF_INET6 ? 40 : 20;
	size_t ulen = fl->udp ? 8 : 0;
	size_t dlen = data ? strlen(data) : 0;

	memcpy(ph.src, from_a ? fl->a : fl->b, alen);
	memcpy(ph.dst, from_a ? fl->b : fl->a, alen);
	dccp_obuf_pad(ob);
	if (ob->overflow)
		die("options do not fit");
	/* DCCP-UDP: the DCCP Checksum is sent as zero (RFC 6773 §3.3) */
	ssize_t n = dccp_build(pkt + ilen + ulen, sizeof(pkt) - ilen - ulen, h, ob->p, ob->len,
			       data, dlen, fl->udp ? NULL : &ph);
	if (n < 0) {
		errno = (int)-n;
		die("dccp_build");
	}
	if (fl->udp)
		dccp_udp_wrap(pkt + ilen, from_a ? fl->ua : fl->ub, from_a ? fl->ub : fl->ua,
			      (size_t)n, &ph);
	size_t l4 = (size_t)n + ulen;
	uint8_t proto = fl->udp ? 17 : DCCP_IPPROTO;
	memset(pkt, 0, ilen);
	if (fl->family == AF_INET) {
		pkt[0] = 0x45;
		put16(pkt + 2, (unsigned)(ilen + l4));
		put16(pkt + 4, frame);
		pkt[6] = 0x40; /* DF */
		pkt[8] = 64;
		pkt[9] = proto;
		memcpy(pkt + 12, ph.src, 4);
		memcpy(pkt + 16, ph.dst, 4);
		put16(pkt + 10, (uint16_t)~dccp_csum_fold(dccp_csum_add(0, pkt, 20)));
	} else {
		pkt[0] = 0x60;
		put16(pkt + 4, (unsigned)l4);
		pkt[6] = proto;
		pkt[7] = 64;
		memcpy(pkt + 8, ph.src, 16);
		memcpy(pkt + 24, ph.dst, 16);
	}
	frame++;
	pcap_record(pkt, ilen + l4);
	describe(fl, h, ob->p, ob->len);
	seed(pkt + ilen, l4,
	     (uint8_t)((fl->family == AF_INET6 ? SEED_V6 : 0) |
		       (established ? SEED_ESTABLISHED : 0) | (fl->udp ? SEED_UDP : 0)));
	h->ccval = 0;
	h->cscov = 0;
}

static void conversation(const struct flow *fl)
{
	const uint64_t iss_c = UINT64_C(0x123456789a00), iss_s = DCCP_SEQ_MASK - 2;
	const uint32_t service = 0x47435354; /* "GCST" */
	const uint8_t cookie[16] = "opaque-cookie-01";
	uint8_t area[512], vec[16];
	struct dccp_obuf b;
	struct dccp_hdr h = { .x = true };
	uint16_t pa = 40001, pb = 5001; /* DCCP ports */
	size_t nv;

#define START(t, from_a, s, a)                          \
	do {                                            \
		h.type = (t);                           \
		h.sport = (from_a) ? pa : pb;           \
		h.dport = (from_a) ? pb : pa;           \
		h.seq = (s);                            \
		h.ack = (a);                            \
		dccp_obuf_init(&b, area, sizeof(area)); \
	} while (0)

	/* RFC 5596: the server invites the client's Request */
	START(DCCP_LISTEN, false, 0, 0);
	h.service = service;
	emit(fl, false, &h, &b, NULL, false);

	/* Request: CCID 2 for client->server, CCID 3 (then 2) for server->client,
	 * short sequence numbers, Ack Vectors from the server, our Sequence
	 * Window, and a Mandatory Send Loss Event Rate for the CCID 3 half */
	START(DCCP_REQUEST, true, iss_c, 0);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_CCID, (const uint8_t[]){ 2 }, 1);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_CCID, (const uint8_t[]){ 3, 2 }, 2);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_SHORT_SEQNOS, (const uint8_t[]){ 1 }, 1);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_SEND_ACK_VECTOR, (const uint8_t[]){ 1 }, 1);
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, 500);
	/* CCID-specific feature 192 lives at the HC-Receiver (RFC 4340 §10.3): the
	 * client, for the server's CCID 3 half, so a Change L */
	dccp_opt_put(&b, DCCP_OPT_MANDATORY, NULL, 0);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_SEND_LOSS_EVENT_RATE, (const uint8_t[]){ 1 }, 1);
	dccp_opt_put_timestamp(&b, 1000);
	emit(fl, true, &h, &b, NULL, false);

	START(DCCP_RESPONSE, false, iss_s, iss_c);
	dccp_feat_put_sp(&b, DCCP_OPT_CONFIRM_R, DCCP_F_CCID, (const uint8_t[]){ 2, 2 }, 2);
	dccp_feat_put_sp(&b, DCCP_OPT_CONFIRM_L, DCCP_F_CCID, (const uint8_t[]){ 3, 3, 2 }, 3);
	dccp_feat_put_sp(&b, DCCP_OPT_CONFIRM_R, DCCP_F_SHORT_SEQNOS, (const uint8_t[]){ 1, 1 }, 2);
	dccp_feat_put_sp(&b, DCCP_OPT_CONFIRM_L, DCCP_F_SEND_ACK_VECTOR, (const uint8_t[]){ 1, 1 }, 2);
	dccp_feat_put_nn(&b, DCCP_OPT_CONFIRM_R, DCCP_F_SEQ_WINDOW, 500);
	dccp_feat_put_sp(&b, DCCP_OPT_CONFIRM_R, DCCP_F_SEND_LOSS_EVENT_RATE,
			 (const uint8_t[]){ 1, 1 }, 2);
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, 1000);
	dccp_opt_put(&b, DCCP_OPT_INIT_COOKIE, cookie, sizeof(cookie));
	dccp_opt_put_ts_echo(&b, 1000, 25);
	dccp_opt_put_timestamp(&b, 5000);
	emit(fl, false, &h, &b, NULL, false);

	/* the client echoes the cookie and sets its Ack Ratio (CCID 2) */
	START(DCCP_ACK, true, iss_c + 1, iss_s);
	dccp_opt_put(&b, DCCP_OPT_INIT_COOKIE, cookie, sizeof(cookie));
	dccp_feat_put_nn(&b, DCCP_OPT_CONFIRM_R, DCCP_F_SEQ_WINDOW, 1000);
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_ACK_RATIO, 3);
	dccp_opt_put_ts_echo(&b, 5000, 0);
	emit(fl, true, &h, &b, NULL, false);

	/* server data (CCID 3 sender: window counter in CCVal) */
	START(DCCP_DATAACK, false, dccp_seq_add(iss_s, 1), iss_c + 1);
	h.ccval = 1;
	dccp_feat_put_nn(&b, DCCP_OPT_CONFIRM_R, DCCP_F_ACK_RATIO, 3);
	dccp_opt_put_timestamp(&b, 5100);
	emit(fl, false, &h, &b, "server datagram 1", true);

	/* client data with CCID 3 feedback for the server's half */
	START(DCCP_DATAACK, true, iss_c + 2, dccp_seq_add(iss_s, 1));
	const struct dccp_loss_interval li[2] = { { 40, 1, 40, false }, { 100, 2, 99, true } };
	dccp_opt_put(&b, DCCP_OPT_SLOW_RECEIVER, NULL, 0);
	dccp_opt_put_ts_echo(&b, 5100, 30);
	dccp_opt_put_elapsed(&b, 30);
	dccp_opt_put_u32(&b, DCCP_OPT_LOSS_EVENT_RATE, 57);
	dccp_opt_put_loss_intervals(&b, 1, li, 2);
	dccp_opt_put_u32(&b, DCCP_OPT_RECEIVE_RATE, 125000);
	dccp_opt_put_data_checksum(&b, "client datagram 1", 17);
	emit(fl, true, &h, &b, "client datagram 1", true);

	/* the server acknowledges with an Ack Vector and Data Dropped (CCID 2 receiver) */
	START(DCCP_ACK, false, dccp_seq_add(iss_s, 2), iss_c + 2);
	nv = 0;
	dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_RECEIVED, 3);
	dccp_opt_put_vector(&b, DCCP_OPT_ACKVEC0, vec, nv);
	nv = 0; /* the newest packet's data was dropped in the receive buffer */
	dccp_dropped_rle(vec, &nv, sizeof(vec), 2, 1);
	dccp_opt_put_vector(&b, DCCP_OPT_DATA_DROPPED, vec, nv);
	dccp_opt_put_elapsed(&b, 60000);
	emit(fl, false, &h, &b, NULL, true);

	/* 24-bit sequence numbers, partial checksum coverage (first 4 data bytes) */
	START(DCCP_DATA, true, (iss_c + 3) & 0xffffff, 0);
	h.x = false;
	h.cscov = 2;
	dccp_opt_put_ndp(&b, 0);
	dccp_opt_put_data_checksum(&b, "client datagram 2", 17);
	emit(fl, true, &h, &b, "client datagram 2", true);
	START(DCCP_ACK, false, dccp_seq_add(iss_s, 3) & 0xffffff, (iss_c + 3) & 0xffffff);
	nv = 0;
	dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_RECEIVED, 1);
	dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_ECN_MARKED, 1);
	dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_RECEIVED, 2);
	dccp_opt_put_vector(&b, DCCP_OPT_ACKVEC1, vec, nv);
	emit(fl, false, &h, &b, NULL, true);
	h.x = true;

	/* resynchronize after (imagined) loss */
	START(DCCP_SYNC, true, iss_c + 4, dccp_seq_add(iss_s, 3));
	dccp_opt_put_ndp(&b, 1);
	emit(fl, true, &h, &b, NULL, true);
	START(DCCP_SYNCACK, false, dccp_seq_add(iss_s, 4), iss_c + 4);
	dccp_opt_put_ndp(&b, 2);
	emit(fl, false, &h, &b, NULL, true);

	START(DCCP_CLOSEREQ, false, dccp_seq_add(iss_s, 5), iss_c + 4);
	emit(fl, false, &h, &b, NULL, true);
	START(DCCP_CLOSE, true, iss_c + 5, dccp_seq_add(iss_s, 5));
	emit(fl, true, &h, &b, NULL, true);
	START(DCCP_RESET, false, dccp_seq_add(iss_s, 6), iss_c + 5);
	h.reset_code = DCCP_RESET_CLOSED;
	emit(fl, false, &h, &b, NULL, true);
#undef START
}

int main(int argc, char **argv)
{
	/* classic pcap, native byte order, LINKTYPE_RAW (101) */
	const uint32_t ghdr[6] = { 0xa1b2c3d4u, 2 | 4u << 16, 0, 0, 65535, 101 };
	struct flow fl[4];

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: dccp_pcap OUT.pcap MANIFEST.json [CORPUS_DIR]\n");
		return 2;
	}
	corpus = argc == 4 ? argv[3] : NULL;
	if (!(pcap = fopen(argv[1], "wb")))
		die(argv[1]);
	if (!(manifest = fopen(argv[2], "w")))
		die(argv[2]);
	if (fwrite(ghdr, sizeof(ghdr), 1, pcap) != 1)
		die(argv[1]);
	memset(fl, 0, sizeof(fl));
	for (int i = 0; i < 4; i++) {
		fl[i].family = i & 1 ? AF_INET6 : AF_INET;
		fl[i].udp = i >= 2;
		fl[i].ua = 40000 + (uint16_t)i;
		fl[i].ub = DCCP_UDP_PORT;
		if (fl[i].family == AF_INET) {
			inet_pton(AF_INET, "10.0.0.1", fl[i].a);
			inet_pton(AF_INET, "10.0.0.2", fl[i].b);
		} else {
			inet_pton(AF_INET6, "fd00::1", fl[i].a);
			inet_pton(AF_INET6, "fd00::2", fl[i].b);
		}
	}
	fprintf(manifest, "[");
	for (int i = 0; i < 4; i++)
		conversation(&fl[i]);
	fprintf(manifest, "]\n");
	if (fclose(pcap) != 0 || fclose(manifest) != 0)
		die("closing the output");
	printf("dccp_pcap: %u frames\n", frame);
	return 0;
}
