/* SPDX-License-Identifier: MIT */
/*
 * quic_peer.c - the traffic of the packet-ring paper's P3 experiment
 * (bench/dccp.py) over QUIC DATAGRAM frames (RFC 9221), with ngtcp2 0.12
 * and GnuTLS (ngtcp2_crypto_gnutls).
 *
 *   quic_peer send ADDR PORT --interval-ms I --count N [--size B] [--policy none|video]
 *                  [--cc cubic|reno]
 *   quic_peer recv PORT --count N --timeout-s S
 *
 * A lab peer, not a QUIC product: the receiver makes a self-signed
 * certificate (ECDSA P-256) at start, the sender does not verify it; ALPN
 * "gc-p3".  Both advertise max_datagram_frame_size; the sender checks that
 * the receiver did.  Congestion control is ngtcp2's default (CUBIC in 0.12)
 * with its pacing, or Reno with --cc reno (a control for the comparison
 * with CCID 2, which is TCP-like).  Path MTU discovery is off (its probes
 * would cross the bottleneck too) and packets may use ngtcp2's default
 * 1452-byte UDP payload limit from the start.  QUIC_PEER_LOG=1 in the
 * environment prints ngtcp2's own log on stderr.
 *
 * Packets carry the header and print the lines of bench/dccp_traffic.c
 * (both from bench/p3_video.h), so the driver accounts them the same way:
 * the sender prints
 * "S,seq,type,t_app_ns,dead" when the application sends a packet (dead 0)
 * and again when the late data choice drops it (dead 1); the receiver
 * prints "R,seq,type,t_app_ns,t_rx_ns" per DATAGRAM frame and
 * {"received":N} last.  The sender's JSON summary (stderr) counts what
 * ngtcp2 accepted (at once, or after waiting for the congestion window or
 * for pacing), what the policy dropped and what the head was waiting for
 * then, and the DATAGRAM frames ngtcp2 saw acknowledged or declared lost.
 *
 * Late data choice: the application keeps its own queue in front of ngtcp2.
 * The head datagram is offered to ngtcp2_conn_writev_datagram whenever the
 * sender runs; when it returns 0 (congestion window full or pacing), the
 * datagram stays queued.  Policy "video", as dccp_traffic's: after each new
 * packet, while 3 or more are queued, B/P packets are dropped, oldest first,
 * and I-frame packets only if that is not enough.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "p3_video.h"

enum policy { POL_NONE, POL_VIDEO };

#define QMAX 256	  /* the application's queue, as dccp_traffic's ring */
#define SIZE_MAX_ARG 1400 /* fits one DATAGRAM frame in a 1452-byte UDP payload */
#define ALPN "gc-p3"
/* >= ngtcp2_settings.max_tx_udp_payload_size (1452 by default) */
#define PKT_BUF 1500

static const char priority[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
			       "+CHACHA20-POLY1305:+AES-128-CCM:-GROUP-ALL:+GROUP-SECP256R1:+GROUP-X25519:"
			       "%DISABLE_TLS13_COMPAT_MODE";

struct args {
	const char *addr;
	int port;
	unsigned interval_ms, count, size, timeout_s;
	enum policy policy;
	int cc; /* ngtcp2_cc_algo, -1: ngtcp2's default */
};

/* why ngtcp2 last refused the queue's head */
enum why { W_NONE, W_CWND, W_PACING, W_N };

struct qent {
	uint64_t seq;
	unsigned type;
	enum why why; /* W_NONE: never refused */
	uint8_t buf[SIZE_MAX_ARG];
};

struct peer {
	ngtcp2_crypto_conn_ref ref;
	ngtcp2_conn *conn;
	gnutls_session_t tls;
	gnutls_certificate_credentials_t cred;
	int fd;
	struct sockaddr_in local, remote;
	const struct args *a;
	/* receiver */
	unsigned got;
	/* sender */
	struct qent *q;
	unsigned qn;
	uint64_t accepted, dead, acked, lost, send_err;
	enum why blocked;      /* the head is waiting because of this */
	uint64_t went[W_N];    /* accepted, by the reason it waited (W_NONE: at once) */
	uint64_t dead_by[W_N]; /* dropped by the policy while the head waited for this */
	uint64_t cong_events;  /* congestion window cuts (new recovery periods) */
	ngtcp2_tstamp recovery_ts;
};

static uint64_t mono(void)
{
	return p3_now_ns(CLOCK_MONOTONIC);
}

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "quic_peer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static _Noreturn void die_ng(const char *fn, int rv)
{
	fprintf(stderr, "quic_peer: %s: %s (%d)\n", fn, ngtcp2_strerror(rv), rv);
	exit(1);
}

static _Noreturn void die_tls(const char *fn, int rv)
{
	fprintf(stderr, "quic_peer: %s: %s\n", fn, gnutls_strerror(rv));
	exit(1);
}

static _Noreturn void usage(const char *why)
{
	fprintf(stderr,
		"quic_peer: %s\nusage: quic_peer send ADDR PORT --interval-ms I --count N "
		"[--size B] [--policy none|video] [--cc cubic|reno]\n       quic_peer recv PORT --count N "
		"--timeout-s S\n",
		why);
	exit(2);
}

static unsigned num(const char *opt, const char *v, unsigned lo, unsigned hi)
{
	return p3_num("quic_peer", opt, v, lo, hi);
}

/* ---- ngtcp2 callbacks ----------------------------------------------------- */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
	return ((struct peer *)ref->user_data)->conn;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	(void)gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user)
{
	(void)conn;
	(void)user;
	if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0 ||
	    gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	cid->datalen = cidlen;
	return 0;
}

static int recv_datagram_cb(ngtcp2_conn *conn, uint32_t flags, const uint8_t *data, size_t len, void *user)
{
	(void)conn;
	(void)flags;
	struct peer *p = user;
	p3_log_rx(data, len);
	p->got++;
	return 0;
}

static int ack_datagram_cb(ngtcp2_conn *conn, uint64_t id, void *user)
{
	(void)conn;
	(void)id;
	((struct peer *)user)->acked++;
	return 0;
}

static int lost_datagram_cb(ngtcp2_conn *conn, uint64_t id, void *user)
{
	(void)conn;
	(void)id;
	((struct peer *)user)->lost++;
	return 0;
}

static void callbacks(ngtcp2_callbacks *cb, int server)
{
	memset(cb, 0, sizeof(*cb));
	if (server)
		cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
	else {
		cb->client_initial = ngtcp2_crypto_client_initial_cb;
		cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
	}
	cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
	cb->encrypt = ngtcp2_crypto_encrypt_cb;
	cb->decrypt = ngtcp2_crypto_decrypt_cb;
	cb->hp_mask = ngtcp2_crypto_hp_mask_cb;
	cb->rand = rand_cb;
	cb->get_new_connection_id = new_cid_cb;
	cb->update_key = ngtcp2_crypto_update_key_cb;
	cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
	cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
	cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
	cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
	cb->recv_datagram = recv_datagram_cb;
	cb->ack_datagram = ack_datagram_cb;
	cb->lost_datagram = lost_datagram_cb;
}

static void log_cb(void *user, const char *fmt, ...)
{
	(void)user;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void settings_params(ngtcp2_settings *s, ngtcp2_transport_params *tp)
{
	ngtcp2_settings_default(s); /* cc_algo: NGTCP2_CC_ALGO_CUBIC */
	s->initial_ts = mono();
	if (getenv("QUIC_PEER_LOG")) /* ngtcp2's own log on stderr */
		s->log_printf = log_cb;
	/* no Path MTU discovery (its probes would cross the bottleneck); the
	 * lab's MTU is 1500, so use the default 1452-byte limit from the start
	 * instead of 1200 until a probe succeeds */
	s->no_pmtud = 1;
	s->no_tx_udp_payload_size_shaping = 1;
	ngtcp2_transport_params_default(tp);
	tp->max_datagram_frame_size = 65535;
	tp->max_idle_timeout = 10 * NGTCP2_SECONDS;
	tp->initial_max_data = 1 << 20; /* no streams are used; a sane value */
}

/* What ngtcp2_conn_client_new() and ngtcp2_conn_server_new() take; scid:
 * this end's connection ID, fresh. */
struct conn_params {
	ngtcp2_callbacks cb;
	ngtcp2_settings s;
	ngtcp2_transport_params tp;
	ngtcp2_cid scid;
};

static void conn_params(struct conn_params *c, int server)
{
	callbacks(&c->cb, server);
	settings_params(&c->s, &c->tp);
	c->scid = (ngtcp2_cid){ .datalen = 8 };
	(void)gnutls_rnd(GNUTLS_RND_RANDOM, c->scid.data, c->scid.datalen);
}

static const char *cc_name(ngtcp2_cc_algo cc)
{
	switch (cc) {
	case NGTCP2_CC_ALGO_RENO: return "reno";
	case NGTCP2_CC_ALGO_CUBIC: return "cubic";
	case NGTCP2_CC_ALGO_BBR: return "bbr";
	case NGTCP2_CC_ALGO_BBR2: return "bbr2";
	}
	return "?";
}

/* ---- TLS -------------------------------------------------------------------- */

static void tls_session(struct peer *p, int server)
{
	int rv = gnutls_init(&p->tls,
			     (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NO_END_OF_EARLY_DATA);
	if (rv != 0)
		die_tls("gnutls_init", rv);
	if ((server ? ngtcp2_crypto_gnutls_configure_server_session(p->tls)
		    : ngtcp2_crypto_gnutls_configure_client_session(p->tls)) != 0) {
		fprintf(stderr, "quic_peer: ngtcp2_crypto_gnutls_configure_%s_session failed\n",
			server ? "server" : "client");
		exit(1);
	}
	if ((rv = gnutls_priority_set_direct(p->tls, priority, NULL)) != 0)
		die_tls("gnutls_priority_set_direct", rv);
	gnutls_session_set_ptr(p->tls, &p->ref);
	if ((rv = gnutls_credentials_set(p->tls, GNUTLS_CRD_CERTIFICATE, p->cred)) != 0)
		die_tls("gnutls_credentials_set", rv);
	gnutls_datum_t alpn = { .data = (unsigned char *)ALPN, .size = sizeof(ALPN) - 1 };
	if ((rv = gnutls_alpn_set_protocols(p->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY)) != 0)
		die_tls("gnutls_alpn_set_protocols", rv);
	if (!server)
		gnutls_server_name_set(p->tls, GNUTLS_NAME_DNS, "localhost", strlen("localhost"));
	p->ref.get_conn = get_conn;
	p->ref.user_data = p;
}

/* The receiver's certificate: self-signed, made now, valid for a day. */
static void self_signed(gnutls_certificate_credentials_t cred)
{
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	int rv;
	unsigned char serial[8];
	const char cn[] = "groupcast-quic-lab";
	time_t now = time(NULL);
	if ((rv = gnutls_x509_privkey_init(&key)) != 0 ||
	    (rv = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
					       GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0)) != 0)
		die_tls("gnutls_x509_privkey_generate", rv);
	if ((rv = gnutls_x509_crt_init(&crt)) != 0)
		die_tls("gnutls_x509_crt_init", rv);
	(void)gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
	serial[0] &= 0x7f; /* a positive serial */
	if ((rv = gnutls_x509_crt_set_version(crt, 3)) != 0 ||
	    (rv = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial))) != 0 ||
	    (rv = gnutls_x509_crt_set_activation_time(crt, now - 3600)) != 0 ||
	    (rv = gnutls_x509_crt_set_expiration_time(crt, now + 86400)) != 0 ||
	    (rv = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
						sizeof(cn) - 1)) != 0 ||
	    (rv = gnutls_x509_crt_set_key(crt, key)) != 0 ||
	    (rv = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) != 0)
		die_tls("self-signed certificate", rv);
	if ((rv = gnutls_certificate_set_x509_key(cred, &crt, 1, key)) != 0)
		die_tls("gnutls_certificate_set_x509_key", rv);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
}

/* ---- packets ---------------------------------------------------------------- */

static ngtcp2_path path_of(struct peer *p)
{
	return (ngtcp2_path){
		.local = { .addr = (struct sockaddr *)&p->local, .addrlen = sizeof(p->local) },
		.remote = { .addr = (struct sockaddr *)&p->remote, .addrlen = sizeof(p->remote) }
	};
}

static void send_pkt(struct peer *p, const uint8_t *b, size_t n)
{
	ssize_t r;
	do
		r = sendto(p->fd, b, n, 0, (struct sockaddr *)&p->remote, sizeof(p->remote));
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno != ENOBUFS && errno != ECONNREFUSED && errno != EAGAIN)
			die("sendto");
		p->send_err++; /* lost before the wire, as a UDP datagram would be */
	}
}

/* Reads what arrived; returns 0 or ngtcp2's error (DRAINING: the peer closed). */
static int read_all(struct peer *p)
{
	uint8_t b[65536];
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(p->fd, b, sizeof(b), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNREFUSED))
			return 0;
		if (n < 0)
			die("recvfrom");
		if (from.sin_addr.s_addr != p->remote.sin_addr.s_addr || from.sin_port != p->remote.sin_port)
			continue; /* one connection per run */
		ngtcp2_path path = path_of(p);
		ngtcp2_pkt_info pi = { 0 };
		int rv = ngtcp2_conn_read_pkt(p->conn, &path, &pi, b, (size_t)n, mono());
		if (rv != 0)
			return rv;
	}
}

static int expire(struct peer *p)
{
	uint64_t now = mono();
	if (ngtcp2_conn_get_expiry(p->conn) <= now)
		return ngtcp2_conn_handle_expiry(p->conn, now);
	return 0;
}

/* Waits for a packet, ngtcp2's next timer or `until` (monotonic ns), then
 * reads what arrived and runs the timers; returns 0 or ngtcp2's error. */
static int wait_io(struct peer *p, uint64_t until)
{
	uint64_t exp = ngtcp2_conn_get_expiry(p->conn), now = mono();
	if (exp < until)
		until = exp;
	uint64_t d = until > now ? until - now : 0;
	struct timespec ts = { .tv_sec = (time_t)(d / 1000000000u), .tv_nsec = (long)(d % 1000000000u) };
	struct pollfd pf = { .fd = p->fd, .events = POLLIN };
	if (ppoll(&pf, 1, &ts, NULL) < 0 && errno != EINTR)
		die("ppoll");
	int rv = read_all(p);
	return rv != 0 ? rv : expire(p);
}

/* The UDP socket and the TLS credentials; the sender binds none, the
 * receiver (server) p->local. */
static void peer_open(struct peer *p, int server)
{
	p->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (p->fd < 0)
		die("socket");
	if (server) {
		int one = 1;
		setsockopt(p->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(p->fd, (struct sockaddr *)&p->local, sizeof(p->local)) != 0)
			die("bind");
	}
	int rv = gnutls_certificate_allocate_credentials(&p->cred);
	if (rv != 0)
		die_tls("gnutls_certificate_allocate_credentials", rv);
}

/* Connects the socket to p->remote and learns the local address of the
 * path (ngtcp2 checks it). */
static void peer_connect(struct peer *p)
{
	if (connect(p->fd, (struct sockaddr *)&p->remote, sizeof(p->remote)) != 0)
		die("connect");
	socklen_t ll = sizeof(p->local);
	if (getsockname(p->fd, (struct sockaddr *)&p->local, &ll) != 0)
		die("getsockname");
}

static void peer_close(struct peer *p)
{
	ngtcp2_conn_del(p->conn);
	gnutls_deinit(p->tls);
	gnutls_certificate_free_credentials(p->cred);
	close(p->fd);
}

/* ---- sender ------------------------------------------------------------------ */

static void q_remove(struct peer *p, unsigned i)
{
	memmove(&p->q[i], &p->q[i + 1], (p->qn - i - 1) * sizeof(p->q[0]));
	p->qn--;
}

/* dccp_traffic's late_choice() on the application's queue: everything in
 * it is still the application's (ngtcp2 has not taken it). */
static void late_choice(struct peer *p)
{
	if (p->a->policy != POL_VIDEO)
		return;
	for (unsigned pass = 0; pass < P3_VIDEO_PASSES; pass++)
		for (unsigned i = 0; i < p->qn;) {
			if (p3_video_drops(pass, p->q[i].type, p->qn)) {
				p3_log_sent(p->q[i].buf, 1);
				p->dead++;
				p->dead_by[p->blocked]++;
				q_remove(p, i);
			} else
				i++;
		}
}

/* Offers the queue's head to ngtcp2 until it refuses; also sends ACKs and
 * whatever else ngtcp2 has (with an empty queue, as the receiver's and
 * the handshake's always is, only that: ACKs, handshake, probes). */
static void flush(struct peer *p)
{
	uint8_t b[PKT_BUF];
	uint64_t ts = mono();
	for (;;) {
		ngtcp2_path_storage ps;
		ngtcp2_path_storage_zero(&ps);
		ngtcp2_pkt_info pi;
		ngtcp2_ssize n;
		int accepted = 0;
		if (p->qn) {
			ngtcp2_vec v = { .base = p->q[0].buf, .len = p->a->size };
			n = ngtcp2_conn_writev_datagram(p->conn, &ps.path, &pi, b, sizeof(b),
							&accepted, NGTCP2_WRITE_DATAGRAM_FLAG_NONE,
							p->q[0].seq, &v, 1, ts);
			if (n < 0)
				die_ng("ngtcp2_conn_writev_datagram", (int)n);
		} else {
			n = ngtcp2_conn_write_pkt(p->conn, &ps.path, &pi, b, sizeof(b), ts);
			if (n < 0)
				die_ng("ngtcp2_conn_write_pkt", (int)n);
		}
		if (n == 0) {
			if (p->qn) { /* refused: the datagram stays with the application;
				      * ngtcp2 sends while bytes in flight < cwnd, so
				      * with room left it was pacing */
				p->blocked = ngtcp2_conn_get_cwnd_left(p->conn) == 0 ? W_CWND : W_PACING;
				p->q[0].why = p->blocked;
			}
			break;
		}
		send_pkt(p, b, (size_t)n);
		if (accepted) {
			p->accepted++;
			p->went[p->q[0].why]++;
			p->blocked = W_NONE;
			q_remove(p, 0);
		}
	}
	ngtcp2_conn_update_pkt_tx_time(p->conn, ts);
}

/* One pass of the event loop: what arrived, timers, what can go. */
static void step(struct peer *p, uint64_t until)
{
	int rv = wait_io(p, until);
	if (rv != 0)
		die_ng("connection", rv);
	/* ngtcp2 starts a recovery period, and cuts the window, on a loss or
	 * ECN event outside the current one */
	ngtcp2_conn_stat st;
	ngtcp2_conn_get_conn_stat(p->conn, &st);
	if (st.congestion_recovery_start_ts != UINT64_MAX &&
	    st.congestion_recovery_start_ts != p->recovery_ts) {
		p->cong_events++;
		p->recovery_ts = st.congestion_recovery_start_ts;
	}
	flush(p);
}

static void send_main(const struct args *a)
{
	struct peer p = { .a = a };
	p.remote = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)a->port) };
	if (inet_pton(AF_INET, a->addr, &p.remote.sin_addr) != 1) {
		fprintf(stderr, "quic_peer: ADDR: '%s' is not an IPv4 address\n", a->addr);
		exit(2);
	}
	peer_open(&p, 0);
	peer_connect(&p);
	tls_session(&p, 0); /* no trust store, no verification: a lab peer */

	ngtcp2_cid dcid = { .datalen = NGTCP2_MIN_INITIAL_DCIDLEN };
	(void)gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen);
	struct conn_params cp;
	conn_params(&cp, 0);
	if (a->cc >= 0)
		cp.s.cc_algo = (ngtcp2_cc_algo)a->cc;
	ngtcp2_path path = path_of(&p);
	int rv;
	if ((rv = ngtcp2_conn_client_new(&p.conn, &dcid, &cp.scid, &path, NGTCP2_PROTO_VER_V1,
					 &cp.cb, &cp.s, &cp.tp, NULL, &p)) != 0)
		die_ng("ngtcp2_conn_client_new", rv);
	ngtcp2_conn_set_tls_native_handle(p.conn, p.tls);

	/* handshake */
	uint64_t limit = mono() + 10ull * 1000000000u;
	flush(&p);
	while (!ngtcp2_conn_get_handshake_completed(p.conn)) {
		if (mono() > limit) {
			fprintf(stderr, "quic_peer: handshake with %s:%d: no answer in 10 s\n",
				a->addr, a->port);
			exit(1);
		}
		step(&p, limit);
	}
	const ngtcp2_transport_params *rp = ngtcp2_conn_get_remote_transport_params(p.conn);
	if (!rp || rp->max_datagram_frame_size < a->size + 8u) {
		fprintf(stderr, "quic_peer: the receiver accepts no DATAGRAM frame of %u bytes\n",
			a->size);
		exit(1);
	}
	/* short header (flags, connection ID, packet number), AEAD tag,
	 * DATAGRAM frame type and length: else ngtcp2 would refuse every
	 * datagram as not fitting, which looks like congestion */
	size_t room = ngtcp2_conn_get_path_max_tx_udp_payload_size(p.conn);
	if (a->size + 1u + NGTCP2_MAX_CIDLEN + 4u + 16u + 1u + 8u > room) {
		fprintf(stderr, "quic_peer: --size %u does not fit a %zu-byte UDP payload\n",
			a->size, room);
		exit(2);
	}

	p.q = calloc(QMAX, sizeof(*p.q));
	if (!p.q)
		die("calloc");
	uint64_t t0 = mono(), seq = 0, step_ns = a->interval_ms * 1000000ull;
	while (seq < a->count) {
		uint64_t due = t0 + seq * step_ns;
		if (mono() < due) {
			step(&p, due);
			continue;
		}
		while (p.qn == QMAX) /* full: only possible without a policy */
			step(&p, mono() + step_ns);
		struct qent *e = &p.q[p.qn++];
		p3_fill(e->buf, a->size, seq);
		e->seq = seq;
		e->type = p3_frame_type(seq);
		e->why = W_NONE;
		p3_log_sent(e->buf, 0);
		late_choice(&p);
		flush(&p);
		seq++;
	}
	/* as gc_dccp_close(c, 3000): up to 3 s for the queue, then for the ACKs */
	limit = mono() + 3ull * 1000000000u;
	ngtcp2_conn_stat st;
	for (;;) {
		ngtcp2_conn_get_conn_stat(p.conn, &st);
		if ((p.qn == 0 && st.bytes_in_flight == 0) || mono() >= limit)
			break;
		step(&p, limit);
	}
	ngtcp2_conn_get_conn_stat(p.conn, &st);
	fprintf(stderr,
		"{\"sent\":%" PRIu64 ",\"dead\":%" PRIu64 ",\"unsent\":%u,\"acked\":%" PRIu64
		",\"lost\":%" PRIu64 ",\"went_at_once\":%" PRIu64 ",\"went_after_cwnd\":%" PRIu64
		",\"went_after_pacing\":%" PRIu64 ",\"dead_behind_cwnd\":%" PRIu64
		",\"dead_behind_pacing\":%" PRIu64 ",\"congestion_events\":%" PRIu64
		",\"send_err\":%" PRIu64 ",\"ngtcp2\":\"%s\",\"cc\":\"%s\",\"cwnd\":%" PRIu64
		",\"ssthresh\":%" PRIu64 ",\"rtt_us\":%" PRIu64 ",\"min_rtt_us\":%" PRIu64 "}\n",
		p.accepted, p.dead, p.qn, p.acked, p.lost, p.went[W_NONE], p.went[W_CWND],
		p.went[W_PACING], p.dead_by[W_CWND], p.dead_by[W_PACING], p.cong_events, p.send_err,
		ngtcp2_version(0)->version_str, cc_name(cp.s.cc_algo), st.cwnd,
		st.ssthresh == UINT64_MAX ? 0 : st.ssthresh, st.smoothed_rtt / 1000,
		st.min_rtt == UINT64_MAX ? 0 : st.min_rtt / 1000);

	/* close: one CONNECTION_CLOSE, the receiver stops on it */
	uint8_t b[PKT_BUF];
	ngtcp2_path_storage ps;
	ngtcp2_path_storage_zero(&ps);
	ngtcp2_pkt_info pi;
	ngtcp2_connection_close_error ce;
	ngtcp2_connection_close_error_default(&ce);
	ngtcp2_ssize n =
		ngtcp2_conn_write_connection_close(p.conn, &ps.path, &pi, b, sizeof(b), &ce, mono());
	if (n > 0)
		send_pkt(&p, b, (size_t)n);
	fflush(stdout);
	peer_close(&p);
	free(p.q);
}

/* ---- receiver ------------------------------------------------------------------ */

static void recv_main(const struct args *a)
{
	struct peer p = { .a = a };
	setvbuf(stdout, NULL, _IOLBF, 0); /* the driver may stop us: keep every line */
	p.local = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)a->port) };
	peer_open(&p, 1);
	self_signed(p.cred);
	fprintf(stderr, "listening\n");
	uint64_t deadline = mono() + (uint64_t)a->timeout_s * 1000000000u;

	/* the client's first Initial */
	uint8_t b[65536];
	ssize_t n;
	ngtcp2_pkt_hd hd;
	for (;;) {
		uint64_t now = mono();
		if (now >= deadline) {
			fprintf(stderr, "quic_peer: no QUIC Initial within --timeout-s %u\n",
				a->timeout_s);
			exit(1);
		}
		struct pollfd pf = { .fd = p.fd, .events = POLLIN };
		int left = (int)((deadline - now) / 1000000u) + 1;
		if (poll(&pf, 1, left > 200 ? 200 : left) <= 0)
			continue;
		socklen_t fl = sizeof(p.remote);
		n = recvfrom(p.fd, b, sizeof(b), 0, (struct sockaddr *)&p.remote, &fl);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("recvfrom");
		if (ngtcp2_accept(&hd, b, (size_t)n) == 0)
			break;
	}
	/* the address the client sent to */
	peer_connect(&p);

	struct conn_params cp;
	conn_params(&cp, 1);
	cp.tp.original_dcid = hd.dcid;
	cp.tp.stateless_reset_token_present = 1;
	(void)gnutls_rnd(GNUTLS_RND_RANDOM, cp.tp.stateless_reset_token,
			 sizeof(cp.tp.stateless_reset_token));
	ngtcp2_path path = path_of(&p);
	int rv;
	if ((rv = ngtcp2_conn_server_new(&p.conn, &hd.scid, &cp.scid, &path, hd.version, &cp.cb,
					 &cp.s, &cp.tp, NULL, &p)) != 0)
		die_ng("ngtcp2_conn_server_new", rv);
	tls_session(&p, 1);
	ngtcp2_conn_set_tls_native_handle(p.conn, p.tls);
	ngtcp2_pkt_info pi = { 0 };
	if ((rv = ngtcp2_conn_read_pkt(p.conn, &path, &pi, b, (size_t)n, mono())) != 0)
		die_ng("ngtcp2_conn_read_pkt (Initial)", rv);

	int closed = 0;
	while (p.got < a->count && !closed) {
		flush(&p);
		if (mono() >= deadline)
			break;
		rv = wait_io(&p, deadline);
		if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_IDLE_CLOSE)
			closed = 1; /* the sender closed or went away */
		else if (rv == NGTCP2_ERR_CRYPTO)
			fprintf(stderr, "quic_peer: TLS alert %u\n", ngtcp2_conn_get_tls_alert(p.conn));
		if (rv != 0 && !closed)
			die_ng("connection", rv);
	}
	if (!closed)
		flush(&p); /* the last ACKs */
	fflush(stdout);
	fprintf(stderr, "{\"received\":%u}\n", p.got);
	peer_close(&p);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		usage("too few arguments");
	struct args a = { .size = SIZE_MAX_ARG, .timeout_s = 60, .interval_ms = 30, .count = 100, .cc = -1 };
	int send = !strcmp(argv[1], "send");
	if (!send && strcmp(argv[1], "recv"))
		usage("the first argument is send or recv");
	int i = 2;
	if (send) {
		if (argc < 4)
			usage("send needs ADDR PORT");
		a.addr = argv[i++];
	}
	a.port = (int)num("PORT", argv[i++], 1, 65535);
	for (; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		i++;
		if (!strcmp(o, "--interval-ms"))
			a.interval_ms = num(o, v, 1, 10000);
		else if (!strcmp(o, "--count"))
			a.count = num(o, v, 1, 10000000);
		else if (!strcmp(o, "--size") && send)
			a.size = num(o, v, (unsigned)sizeof(struct p3_hdr), SIZE_MAX_ARG);
		else if (!strcmp(o, "--timeout-s") && !send)
			a.timeout_s = num(o, v, 1, 3600);
		else if (!strcmp(o, "--policy") && send) {
			if (v && !strcmp(v, "video"))
				a.policy = POL_VIDEO;
			else if (v && !strcmp(v, "none"))
				a.policy = POL_NONE;
			else
				usage("--policy is none or video");
		} else if (!strcmp(o, "--cc") && send) {
			if (v && !strcmp(v, "cubic"))
				a.cc = NGTCP2_CC_ALGO_CUBIC;
			else if (v && !strcmp(v, "reno"))
				a.cc = NGTCP2_CC_ALGO_RENO;
			else
				usage("--cc is cubic or reno");
		} else
			usage("unknown option");
	}
	if (send)
		send_main(&a);
	else
		recv_main(&a);
	return 0;
}
