// SPDX-License-Identifier: MIT

// Package groupcast sends one datagram to many unicast receivers with one
// call: a group of receivers is attached to a UDP socket, and Send reaches
// them all (group unicast), on the best engine the machine allows: an eBPF
// program that clones the packet in the kernel, io_uring or sendmmsg.
//
// It binds libgroupcast 1.0 with cgo (pkg-config name groupcast).  The
// socket stays Go's: Attach reaches its descriptor through
// syscall.RawConn, so the *net.UDPConn keeps working, and a send holds the
// descriptor as a Write on the connection does.  Each Send or SendGroup is
// one cgo call, whatever the size of the group.  The man pages groupcast(7),
// gc_setgroup(3), gc_send(3), gc_sendgroup(3) and gc_set_engine(3) have the
// full contract.
//
// A Group is safe for use by several goroutines; calls on one Group are
// serialized.
package groupcast

/*
#cgo pkg-config: groupcast
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"groupcast/internal/addr"
)

// Error is a failure of a call to the library: the errno and the library's
// one-line message naming the argument or the reason (gc_errmsg()).
// errors.Is(err, syscall.EINVAL) and the like match its Errno.
type Error struct {
	Op    string        // the library function, e.g. "gc_setgroup"
	Errno syscall.Errno // its errno
	Msg   string        // gc_errmsg()
}

// Error returns the library's message, prefixed with Op unless it names it.
func (e *Error) Error() string {
	if strings.HasPrefix(e.Msg, e.Op+":") {
		return e.Msg
	}
	return e.Op + ": " + e.Msg
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

func cerr(op string, e *C.struct_gcgo_err) error {
	return &Error{Op: op, Errno: syscall.Errno(e.errnum), Msg: C.GoString(&e.msg[0])}
}

// MemberError is one member that a send did not reach.
type MemberError struct {
	Index int            // the member's index in the group given to SetGroup
	Addr  netip.AddrPort // the member
	Errno syscall.Errno  // why: ENETUNREACH, EPERM (a firewall), EAGAIN (a full queue), ...
}

// Error returns "addr: errno text".
func (m MemberError) Error() string { return m.Addr.String() + ": " + m.Errno.Error() }

// Unwrap returns the errno.
func (m MemberError) Unwrap() error { return m.Errno }

// PartialError is what Send returns when some members were not sent to; the
// other members were.
type PartialError struct {
	Sent   int           // members sent to
	Failed []MemberError // every member that failed, in group order
	Msg    string        // the library's message (gc_errmsg())
}

// Error names the failed members (the first few) and their errno.
func (e *PartialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "groupcast: %d of %d members failed:", len(e.Failed), len(e.Failed)+e.Sent)
	for i, m := range e.Failed {
		if i == 4 {
			b.WriteString(" ...")
			break
		}
		b.WriteString(" " + m.Error())
		if i < len(e.Failed)-1 {
			b.WriteString(",")
		}
	}
	return b.String()
}

// Is reports whether any member failed with target (a syscall.Errno), so
// errors.Is(err, syscall.EPERM) tells whether a firewall refused a member.
func (e *PartialError) Is(target error) bool {
	for _, m := range e.Failed {
		if m.Errno == target {
			return true
		}
	}
	return false
}

// Engine is how a group send goes out; all engines send the same bytes.
type Engine int

// The engines (gc_set_engine(3)).
const (
	EngineAuto     Engine = C.GC_ENGINE_AUTO     // the best the machine allows: Kernel where it may, else Mmsg
	EngineLoop     Engine = C.GC_ENGINE_LOOP     // sendto() per member
	EngineMmsg     Engine = C.GC_ENGINE_MMSG     // sendmmsg() in batches
	EngineUring    Engine = C.GC_ENGINE_URING    // io_uring SENDMSG
	EngineUringZC  Engine = C.GC_ENGINE_URING_ZC // io_uring SENDMSG_ZC
	EngineKernel   Engine = C.GC_ENGINE_KERNEL   // eBPF clones in the kernel: CAP_BPF + CAP_NET_ADMIN
	engineCount    Engine = C.GC_ENGINE_COUNT
	engineNoneC           = C.GC_ENGINE_NONE
	maxReasonBytes        = 512
)

var engineNames = [...]string{"auto", "loop", "mmsg", "uring", "uring_zc", "kernel"}

// String returns the engine's name as groupcast(1) spells it ("kernel", ...).
func (e Engine) String() string {
	if e >= 0 && e < engineCount {
		return engineNames[e]
	}
	return "Engine(" + strconv.Itoa(int(e)) + ")"
}

// ParseEngine returns the engine named s ("auto", "loop", "mmsg", "uring",
// "uring_zc", "kernel").
func ParseEngine(s string) (Engine, error) {
	for i, n := range engineNames {
		if n == s {
			return Engine(i), nil
		}
	}
	return 0, fmt.Errorf("groupcast: no engine named %q", s)
}

// Available tells whether engine e can be used on this machine: nil, or an
// *Error (ENOTSUP) saying why not.
func (e Engine) Available() error {
	var ce C.struct_gcgo_err
	if C.gcgo_engine_available(C.int(e), &ce) != 0 {
		return cerr("gc_engine_available", &ce)
	}
	return nil
}

// Group is a group of receivers attached to a UDP socket.
type Group struct {
	mu    sync.Mutex
	rc    syscall.RawConn
	bufs  C.struct_gcgo_bufs // C memory: nothing in it points into Go memory
	addrs []netip.AddrPort   // the group, as SetGroup was given it
	lens  []C.size_t         // SendGroup's offsets and lengths, reused
	freed bool
}

// Attach prepares c for group sends.  c stays the caller's, and keeps
// working as before (reads, writes, deadlines); Close the Group before
// closing c, or the library's state for the socket is freed when the
// descriptor number is reused.
func Attach(c *net.UDPConn) (*Group, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Group{rc: rc}, nil
}

// control runs f with the socket's descriptor, as SyscallConn().Control
// does (the descriptor cannot be closed meanwhile).
func (g *Group) control(f func(fd C.int)) error {
	if g.freed {
		return net.ErrClosed
	}
	return g.rc.Control(func(fd uintptr) { f(C.int(fd)) })
}

// member writes a into C memory.
func member(m *C.struct_gcgo_member, a netip.AddrPort) error {
	p, err := addr.Split(a)
	if err != nil {
		return err
	}
	*(*[16]byte)(unsafe.Pointer(&m.addr[0])) = p.Addr
	m.port, m.family, m.scope = C.ushort(p.Port), C.uchar(p.Family), C.uint(p.Scope)
	return nil
}

func (g *Group) members(addrs []netip.AddrPort, arena int) error {
	var ce C.struct_gcgo_err
	if C.gcgo_reserve(&g.bufs, C.size_t(len(addrs)), C.size_t(arena), &ce) != 0 {
		return cerr("groupcast", &ce)
	}
	if len(addrs) == 0 {
		return nil
	}
	ms := unsafe.Slice(g.bufs.m, len(addrs))
	for i, a := range addrs {
		if err := member(&ms[i], a); err != nil {
			return fmt.Errorf("members[%d]: %w", i, err)
		}
	}
	return nil
}

// SetGroup replaces the whole group with addrs (IPv4 members on an IPv4 or
// dual-stack socket, IPv6 members on an IPv6 socket), or clears it when
// addrs is empty.  On an error (an *Error naming the member) the previous
// group stays.  Replacing the group before every send is cheap.
func (g *Group) SetGroup(addrs []netip.AddrPort) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.members(addrs, 0); err != nil {
		return err
	}
	var ce C.struct_gcgo_err
	var rc C.int
	if err := g.control(func(fd C.int) { rc = C.gcgo_setgroup(fd, &g.bufs, C.size_t(len(addrs)), &ce) }); err != nil {
		return err
	}
	if rc != 0 {
		return cerr("gc_setgroup", &ce)
	}
	g.addrs = append(g.addrs[:0], addrs...)
	return nil
}

// Send sends b to every member as one datagram each, without blocking.  It
// returns nil when every member was sent to, a *PartialError naming each
// member that was not (the others were sent to), or an *Error when the call
// was refused and nothing was sent (no group: EDESTADDRREQ; b too long:
// EMSGSIZE).
func (g *Group) Send(b []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	var ce C.struct_gcgo_err
	var rc C.ssize_t
	var failed C.ssize_t
	n := len(g.addrs)
	if err := g.control(func(fd C.int) {
		rc = C.gcgo_send(fd, p, C.size_t(len(b)), &g.bufs, C.size_t(n), &failed, &ce)
	}); err != nil {
		return err
	}
	if rc >= 0 {
		return nil
	}
	if failed == 0 {
		return cerr("gc_send", &ce)
	}
	errs := unsafe.Slice(g.bufs.errs, n)
	pe := &PartialError{Sent: n - int(failed), Msg: C.GoString(&ce.msg[0])}
	for i, e := range errs {
		if e != 0 {
			pe.Failed = append(pe.Failed, MemberError{Index: i, Addr: g.addrs[i], Errno: syscall.Errno(e)})
		}
	}
	return pe
}

// Recipient is one datagram of SendGroup: Prepend, then the shared
// payload, then Append, to Addr.
type Recipient struct {
	Addr    netip.AddrPort
	Prepend []byte
	Append  []byte
}

// SendGroup sends recs[i].Prepend | shared | recs[i].Append to each
// recs[i].Addr, without blocking; the group set with SetGroup is not used.
// It returns the number of recipients sent to and, when that is less than
// len(recs), errs with errs[i] nil or recipient i's error (a MemberError, or
// an *Error for a recipient the library refused: a bad address, a datagram
// too long).  When the call itself is refused, nothing is sent, n is 0 and
// errs holds that one error.
func (g *Group) SendGroup(shared []byte, recs []Recipient) (n int, errs []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	arena := 0
	for i := range recs {
		arena += len(recs[i].Prepend) + len(recs[i].Append)
	}
	addrs := make([]netip.AddrPort, len(recs))
	for i := range recs {
		addrs[i] = recs[i].Addr
	}
	if err := g.members(addrs, arena); err != nil {
		return 0, []error{err}
	}
	if cap(g.lens) < 4*len(recs) {
		g.lens = make([]C.size_t, 4*len(recs))
	}
	lens := g.lens[:4*len(recs)]
	if arena > 0 {
		a := unsafe.Slice((*byte)(unsafe.Pointer(g.bufs.arena)), arena)
		off := 0
		for i := range recs {
			lens[4*i] = C.size_t(off)
			off += copy(a[off:], recs[i].Prepend)
			lens[4*i+1] = C.size_t(len(recs[i].Prepend))
			lens[4*i+2] = C.size_t(off)
			off += copy(a[off:], recs[i].Append)
			lens[4*i+3] = C.size_t(len(recs[i].Append))
		}
	} else {
		for i := range lens {
			lens[i] = 0
		}
	}
	var sp unsafe.Pointer
	if len(shared) > 0 {
		sp = unsafe.Pointer(&shared[0])
	}
	var lp *C.size_t
	if len(lens) > 0 {
		lp = &lens[0]
	}
	var ce C.struct_gcgo_err
	var rc C.int
	if err := g.control(func(fd C.int) {
		rc = C.gcgo_sendgroup(fd, sp, C.size_t(len(shared)), &g.bufs, lp, C.size_t(len(recs)), &ce)
	}); err != nil {
		return 0, []error{err}
	}
	if rc < 0 {
		return 0, []error{cerr("gc_sendgroup", &ce)}
	}
	if int(rc) == len(recs) {
		return len(recs), nil
	}
	errs = make([]error, len(recs))
	for i, e := range unsafe.Slice(g.bufs.errs, len(recs)) {
		if e != 0 {
			errs[i] = MemberError{Index: i, Addr: recs[i].Addr, Errno: syscall.Errno(e)}
		}
	}
	return int(rc), errs
}

// SetEngine chooses the engine that sends for the socket.  An *Error with
// ENOTSUP says why an engine cannot be used here.
func (g *Group) SetEngine(e Engine) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ce C.struct_gcgo_err
	var rc C.int
	if err := g.control(func(fd C.int) { rc = C.gcgo_set_engine(fd, C.int(e), &ce) }); err != nil {
		return err
	}
	if rc != 0 {
		return cerr("gc_set_engine", &ce)
	}
	return nil
}

// Engine returns the engine that sends for the socket, EngineAuto resolved.
func (g *Group) Engine() (Engine, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ce C.struct_gcgo_err
	var rc C.int
	if err := g.control(func(fd C.int) { rc = C.gcgo_get_engine(fd, &ce) }); err != nil {
		return 0, err
	}
	if rc == engineNoneC {
		return 0, cerr("gc_get_engine", &ce)
	}
	return Engine(rc), nil
}

// AutoReason says why EngineAuto took the kernel engine for the socket, or
// why not (not available here, or declined because it would bypass an
// egress policy: groupcast(7)).
func (g *Group) AutoReason() (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var buf [maxReasonBytes]C.char
	var ce C.struct_gcgo_err
	var rc C.int
	if err := g.control(func(fd C.int) { rc = C.gcgo_auto_reason(fd, &buf[0], C.size_t(len(buf)), &ce) }); err != nil {
		return "", err
	}
	if rc != 0 {
		return "", cerr("gc_auto_reason", &ce)
	}
	return C.GoString(&buf[0]), nil
}

// Stats are the socket's counters since its state was created (gc_stats()).
type Stats struct {
	GroupSends   uint64        // Send and SendGroup calls that reached an engine
	Datagrams    uint64        // datagrams handed to the kernel
	Bytes        uint64        // their payload bytes
	Failed       uint64        // datagrams that failed or were refused
	UserFallback uint64        // kernel engine: datagrams it left to a user engine
	LastErrno    syscall.Errno // errno of the most recent failed datagram, or 0
}

// Stats returns the socket's counters.
func (g *Group) Stats() (Stats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st C.struct_gcgo_stats
	var ce C.struct_gcgo_err
	var rc C.int
	if err := g.control(func(fd C.int) { rc = C.gcgo_stats(fd, &st, &ce) }); err != nil {
		return Stats{}, err
	}
	if rc != 0 {
		return Stats{}, cerr("gc_stats", &ce)
	}
	return Stats{uint64(st.group_sends), uint64(st.datagrams), uint64(st.bytes), uint64(st.failed),
		uint64(st.user_fallback), syscall.Errno(st.last_errno)}, nil
}

// Close frees what the library keeps for the socket (gc_release()) and the
// Group's C buffers.  The socket stays open.  Close is idempotent.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return nil
	}
	var ce C.struct_gcgo_err
	var rc C.int
	err := g.control(func(fd C.int) { rc = C.gcgo_release(fd, &ce) })
	g.freed = true
	C.gcgo_free(&g.bufs)
	if err != nil {
		// the socket is closed already: its state goes when the
		// descriptor number is reused (gc_release(3))
		return nil
	}
	if rc != 0 {
		return cerr("gc_release", &ce)
	}
	return nil
}
