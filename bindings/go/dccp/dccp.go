// SPDX-License-Identifier: MIT

// Package dccp is DCCP (RFC 4340) over libgroupcast 1.0 (gc_dccp(3)):
// congestion-controlled datagrams, CCID 2 (TCP-like) or CCID 3 (TFRC),
// natively (IP protocol 33, needs CAP_NET_RAW) or over UDP (RFC 6773).
//
// A *Conn is a net.Conn with datagram boundaries: one Write is one packet,
// one Read one packet.  DCCP never retransmits; Info tells what was lost,
// and DropStale is the sender's late data choice: packets that waited too
// long for the congestion window are dropped before they go.
//
// Networks: "dccp", "dccp4", "dccp6" (native) and "dccp-udp",
// "dccp-udp4", "dccp-udp6" (DCCP-UDP).
package dccp

/*
#cgo pkg-config: groupcast
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"groupcast/internal/addr"
)

// The C API has no descriptor to poll: a blocked Read, Write or Accept
// waits in the library in slices of at most this long, and between two
// slices sees a new deadline or Close.  A deadline known when the call
// starts is kept to the millisecond.
const slice = 50 * time.Millisecond

// UDPPort is DCCP-UDP's default port (RFC 6773 §3.8), taken by Listen for
// port 0.
const UDPPort = C.GC_DCCP_UDP_PORT

// Error is a failure of the library: the errno and gc_errmsg()'s line.
type Error struct {
	Op    string
	Errno syscall.Errno
	Msg   string
}

// Error returns "op: message".
func (e *Error) Error() string { return "dccp " + e.Op + ": " + e.Msg }

// Unwrap returns the errno, so errors.Is(err, syscall.ECONNREFUSED) works.
func (e *Error) Unwrap() error { return e.Errno }

func cerr(op string, e *C.struct_gcgo_err) error {
	return &Error{Op: op, Errno: syscall.Errno(e.errnum), Msg: C.GoString(&e.msg[0])}
}

// ErrTruncated is returned by Read with len(b) bytes when the packet was
// longer than b; the rest of it is gone, as with a UDP socket.
var ErrTruncated = errors.New("dccp: packet longer than the buffer, truncated")

// Config holds the connection's options; the zero value (or nil) takes the
// library's defaults, in brackets.
type Config struct {
	CCID      int           // 2 or 3 [2]
	Service   uint32        // Service Code [0]
	MPS       int           // largest payload, bytes [1400]
	RingSlots int           // send ring records, a power of 2 [1024]
	Timeout   time.Duration // Dial: handshake deadline [10 s]; Close: how long to send what is queued [3 s]
}

// Addr is a DCCP endpoint.
type Addr struct {
	Net      string         // the network, e.g. "dccp-udp4"
	AddrPort netip.AddrPort // the zero value: not known (see Conn.RemoteAddr)
}

// Network returns the network name.
func (a *Addr) Network() string { return a.Net }

// String returns "ip:port", or "unknown".
func (a *Addr) String() string {
	if !a.AddrPort.IsValid() {
		return "unknown"
	}
	return a.AddrPort.String()
}

func encap(network string) (int, string, error) {
	switch network {
	case "dccp", "dccp4", "dccp6":
		return C.GC_DCCP_NATIVE, network[4:], nil
	case "dccp-udp", "dccp-udp4", "dccp-udp6":
		return C.GC_DCCP_UDP, network[8:], nil
	}
	return 0, "", net.UnknownNetworkError(network)
}

func resolve(ctx context.Context, network, address string, listen bool) (C.struct_gcgo_cfg, netip.AddrPort, error) {
	var c C.struct_gcgo_cfg
	enc, fam, err := encap(network)
	if err != nil {
		return c, netip.AddrPort{}, err
	}
	host, ps, err := net.SplitHostPort(address)
	if err != nil {
		return c, netip.AddrPort{}, err
	}
	port, err := net.DefaultResolver.LookupPort(ctx, "udp", ps)
	if err != nil {
		return c, netip.AddrPort{}, err
	}
	var ip netip.Addr
	switch {
	case host == "" && listen && fam == "6":
		ip = netip.IPv6Unspecified()
	case host == "" && listen:
		ip = netip.IPv4Unspecified()
	case host == "":
		return c, netip.AddrPort{}, fmt.Errorf("dccp: %q: no host to dial", address)
	default:
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip"+fam, host)
		if err != nil {
			return c, netip.AddrPort{}, err
		}
		ip = ips[0].Unmap()
	}
	ap := netip.AddrPortFrom(ip, uint16(port))
	p, err := addr.Split(ap)
	if err != nil {
		return c, ap, err
	}
	w := &c.where
	*(*[16]byte)(unsafe.Pointer(&w.addr[0])) = p.Addr
	w.port, w.family, w.scope = C.ushort(p.Port), C.uchar(p.Family), C.uint(p.Scope)
	c.encap = C.int(enc)
	return c, ap, nil
}

func (cfg *Config) apply(c *C.struct_gcgo_cfg) {
	if cfg == nil {
		return
	}
	c.ccid = C.int(cfg.CCID)
	c.service = C.uint32_t(cfg.Service)
	c.mps = C.uint32_t(cfg.MPS)
	c.ring_slots = C.uint32_t(cfg.RingSlots)
	c.timeout_ms = C.uint32_t(cfg.Timeout / time.Millisecond)
}

// Dial opens a connection to address ("host:port") and returns once it is
// OPEN.  The handshake ends at the earlier of cfg.Timeout and ctx's
// deadline; when ctx is cancelled before, Dial returns ctx.Err() at once
// and the connection, if it opens later, is closed.
func Dial(ctx context.Context, network, address string, cfg *Config) (*Conn, error) {
	c, ap, err := resolve(ctx, network, address, false)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	cfg.apply(&c)
	if dl, ok := ctx.Deadline(); ok {
		ms := time.Until(dl) / time.Millisecond
		if ms < 1 {
			ms = 1
		}
		if c.timeout_ms == 0 || C.uint32_t(ms) < c.timeout_ms {
			c.timeout_ms = C.uint32_t(ms)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		d  *C.struct_gc_dccp
		ce C.struct_gcgo_err
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.d = C.gcgo_connect(&c, &r.ce)
		done <- r
	}()
	select {
	case r := <-done:
		if r.d == nil {
			return nil, &net.OpError{Op: "dial", Net: network, Addr: &Addr{network, ap}, Err: cerr("connect", &r.ce)}
		}
		return newConn(r.d, cfg, &Addr{Net: network}, &Addr{network, ap}), nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.d != nil {
				var ce C.struct_gcgo_err
				C.gcgo_close(r.d, 0, &ce)
			}
		}()
		return nil, ctx.Err()
	}
}

// Listener is a passive DCCP endpoint; it implements net.Listener.  It keeps
// no state for a connection until its handshake completes (Init Cookies).
type Listener struct {
	mu     sync.Mutex
	l      *C.struct_gc_dccp_listener
	cfg    *Config
	addr   *Addr
	closed atomic.Bool
}

// Listen opens a listener on address (":port" for every address; port 0
// with DCCP-UDP: UDPPort).
func Listen(network, address string, cfg *Config) (*Listener, error) {
	c, ap, err := resolve(context.Background(), network, address, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	cfg.apply(&c)
	var ce C.struct_gcgo_err
	l := C.gcgo_listen(&c, &ce)
	if l == nil {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: &Addr{network, ap}, Err: cerr("listen", &ce)}
	}
	if ap.Port() == 0 && c.encap == C.GC_DCCP_UDP {
		ap = netip.AddrPortFrom(ap.Addr(), UDPPort)
	}
	return &Listener{l: l, cfg: cfg, addr: &Addr{network, ap}}, nil
}

// AcceptDCCP waits for the next connection whose handshake completed.
func (l *Listener) AcceptDCCP() (*Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.closed.Load() {
			return nil, &net.OpError{Op: "accept", Net: l.addr.Net, Addr: l.addr, Err: net.ErrClosed}
		}
		var ce C.struct_gcgo_err
		d := C.gcgo_accept(l.l, C.int(slice/time.Millisecond), &ce)
		if d != nil {
			return newConn(d, l.cfg, l.addr, &Addr{Net: l.addr.Net}), nil
		}
		if e := syscall.Errno(ce.errnum); e != syscall.ETIMEDOUT && e != syscall.EINTR {
			return nil, &net.OpError{Op: "accept", Net: l.addr.Net, Addr: l.addr, Err: cerr("accept", &ce)}
		}
	}
}

// Accept is AcceptDCCP for net.Listener.
func (l *Listener) Accept() (net.Conn, error) { return l.AcceptDCCP() }

// Addr returns the address Listen was given.
func (l *Listener) Addr() net.Addr { return l.addr }

// Close stops listening; a blocked Accept returns net.ErrClosed.  The
// connections accepted stay open.
func (l *Listener) Close() error {
	if l.closed.Swap(true) {
		return net.ErrClosed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	C.gc_dccp_listener_destroy(l.l)
	l.l = nil
	return nil
}

// Conn is a DCCP connection.  Read and Write may run at once in two
// goroutines; Reads are serialized, and so are Writes.
type Conn struct {
	rmu, wmu      sync.Mutex
	d             *C.struct_gc_dccp
	local, remote *Addr
	closeTimeout  time.Duration
	closed        atomic.Bool
	rdl, wdl      atomic.Int64 // deadlines, Unix ns; 0: none
	seq           uint64
	queued        []C.uint64_t // per ring slot: when its packet was written (ns since start), 0 if not queued
	start         time.Time
	mps           int
}

func newConn(d *C.struct_gc_dccp, cfg *Config, local, remote *Addr) *Conn {
	c := &Conn{d: d, local: local, remote: remote, closeTimeout: 3 * time.Second, start: time.Now(), mps: 1400}
	if cfg != nil && cfg.Timeout > 0 {
		c.closeTimeout = cfg.Timeout
	}
	if cfg != nil && cfg.MPS > 0 {
		c.mps = cfg.MPS
	}
	c.queued = make([]C.uint64_t, C.gcgo_entries(d))
	return c
}

// Info is what Read knows of a packet beyond its bytes.
type Info struct {
	Seq  uint64 // its 48-bit DCCP sequence number
	Lost uint64 // data packets lost between the previous one delivered and this
}

// timeout returns the milliseconds to wait now: a slice, or less before the
// deadline; false when the deadline has passed.
func timeout(dl int64) (C.int, bool) {
	if dl == 0 {
		return C.int(slice / time.Millisecond), true
	}
	left := time.Duration(dl - time.Now().UnixNano())
	if left <= 0 {
		return 0, false
	}
	if left > slice {
		left = slice
	}
	return C.int((left + time.Millisecond - 1) / time.Millisecond), true
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: c.remote.Net, Source: c.local, Addr: c.remote, Err: err}
}

// ReadInfo reads the next packet into b, as Read, and tells its sequence
// number and the packets lost before it.
func (c *Conn) ReadInfo(b []byte) (int, Info, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.closed.Load() {
			return 0, Info{}, c.opErr("read", net.ErrClosed)
		}
		ms, ok := timeout(c.rdl.Load())
		if !ok {
			return 0, Info{}, c.opErr("read", os.ErrDeadlineExceeded)
		}
		var p unsafe.Pointer
		if len(b) > 0 {
			p = unsafe.Pointer(&b[0])
		}
		var seq, lost C.uint64_t
		var eof C.int
		var ce C.struct_gcgo_err
		n := C.gcgo_recv(c.d, p, C.size_t(len(b)), &seq, &lost, &eof, ms, &ce)
		if n < 0 {
			if e := syscall.Errno(ce.errnum); e == syscall.EAGAIN || e == syscall.EINTR {
				continue
			}
			return 0, Info{}, c.opErr("read", cerr("recv", &ce))
		}
		info := Info{Seq: uint64(seq), Lost: uint64(lost)}
		if eof != 0 {
			return 0, info, io.EOF
		}
		if int(n) > len(b) {
			return len(b), info, ErrTruncated
		}
		return int(n), info, nil
	}
}

// Read reads one packet into b: its length, or len(b) and ErrTruncated when
// it was longer.  io.EOF once the peer closed.
func (c *Conn) Read(b []byte) (int, error) {
	n, _, err := c.ReadInfo(b)
	return n, err
}

// Write queues b as one packet and returns len(b); the congestion control
// sends it when it may.  A full send ring blocks until a slot frees or the
// write deadline passes.  A packet longer than Config.MPS is refused with
// EMSGSIZE.
func (c *Conn) Write(b []byte) (int, error) {
	if len(b) > c.mps {
		return 0, c.opErr("write", &Error{Op: "write", Errno: syscall.EMSGSIZE,
			Msg: fmt.Sprintf("b: %d bytes, more than the MPS of %d", len(b), c.mps)})
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		if c.closed.Load() {
			return 0, c.opErr("write", net.ErrClosed)
		}
		var ce C.struct_gcgo_err
		var pos C.unsigned
		if C.gcgo_write(c.d, p, C.size_t(len(b)), C.uint64_t(c.seq), &pos, &ce) == 0 {
			c.seq++
			c.queued[pos] = C.uint64_t(time.Since(c.start)) + 1
			return len(b), nil
		}
		if syscall.Errno(ce.errnum) != syscall.EAGAIN {
			return 0, c.opErr("write", cerr("write", &ce))
		}
		ms, ok := timeout(c.wdl.Load())
		if !ok {
			return 0, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if C.gcgo_wait(c.d, ms, &ce) != 0 && syscall.Errno(ce.errnum) != syscall.ETIMEDOUT {
			return 0, c.opErr("write", cerr("wait", &ce))
		}
	}
}

// DropStale is the late data choice: every packet written more than maxAge
// ago that the congestion control has not sent yet is dropped, and never
// goes (Stats().Dead counts it).  It returns how many were dropped.
func (c *Conn) DropStale(maxAge time.Duration) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return 0, c.opErr("drop", net.ErrClosed)
	}
	cutoff := time.Since(c.start) - maxAge + 1
	if cutoff <= 0 {
		return 0, nil
	}
	var ce C.struct_gcgo_err
	n := C.gcgo_drop(c.d, &c.queued[0], C.unsigned(len(c.queued)), C.uint64_t(cutoff), &ce)
	if n < 0 {
		return 0, c.opErr("drop", cerr("drop", &ce))
	}
	return int(n), nil
}

// Stats are a connection's counters (gc_dccp_stats(3)).
type Stats struct {
	State             string        // "OPEN", "CLOSED", ...
	CCID              int           // 2 or 3
	Cwnd, Pipe        uint32        // CCID 2: window and packets in flight
	RateBps           uint64        // CCID 3: allowed rate, bytes/s
	RTT               time.Duration // smoothed round-trip time (0: none yet)
	Sent, Acked, Lost uint64        // data packets sent, acknowledged, taken as lost
	Dead              uint64        // packets dropped before they went (DropStale)
	Received, RxLost  uint64        // data packets received, and lost on the way in
	Invalid           uint64        // packets dropped by the checks of RFC 4340 §7.5
}

// Stats returns the connection's counters.
func (c *Conn) Stats() (Stats, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.closed.Load() {
		return Stats{}, c.opErr("stats", net.ErrClosed)
	}
	var st C.struct_gcgo_dccp_stats
	var ce C.struct_gcgo_err
	if C.gcgo_stats(c.d, &st, &ce) != 0 {
		return Stats{}, cerr("stats", &ce)
	}
	return Stats{C.GoString(C.gc_dccp_state_name(st.state)), int(st.ccid), uint32(st.cwnd), uint32(st.pipe),
		uint64(st.x_bps), time.Duration(st.rtt_us) * time.Microsecond, uint64(st.sent), uint64(st.acked),
		uint64(st.lost), uint64(st.dead), uint64(st.received), uint64(st.rx_lost), uint64(st.invalid)}, nil
}

// Close sends what is queued (at most Config.Timeout, 3 s by default),
// closes the connection with the peer and frees it.  A blocked Read or Write
// returns net.ErrClosed.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return c.opErr("close", net.ErrClosed)
	}
	c.rmu.Lock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	defer c.rmu.Unlock()
	var ce C.struct_gcgo_err
	rc := C.gcgo_close(c.d, C.int(c.closeTimeout/time.Millisecond), &ce)
	c.d = nil
	if rc != 0 {
		return c.opErr("close", cerr("close", &ce))
	}
	return nil
}

// LocalAddr returns the local address: the listener's for an accepted
// connection; for a dialed one only the network (libgroupcast 1.0 does not
// tell which address and port the connection got).
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer: the address dialed; for an accepted
// connection only the network (libgroupcast 1.0 does not tell the peer).
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SetReadDeadline bounds Read: past t it returns os.ErrDeadlineExceeded.  A
// Read already waiting sees a new deadline within 50 ms.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rdl.Store(ns(t)); return nil }

// SetWriteDeadline bounds how long Write waits for room in the send ring.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wdl.Store(ns(t)); return nil }
