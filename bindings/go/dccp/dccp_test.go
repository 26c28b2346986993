// SPDX-License-Identifier: MIT

package dccp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"groupcast/dccp"
	"groupcast/internal/netns"
)

func TestMain(m *testing.M) { netns.Main(m) }

// pair listens on network at addr, dials it, and returns both ends.
func pair(t *testing.T, network, addr string, cfg *dccp.Config) (client, server *dccp.Conn) {
	t.Helper()
	l, err := dccp.Listen(network, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan *dccp.Conn, 1)
	go func() {
		c, err := l.AcceptDCCP()
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, err = dccp.Dial(ctx, network, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		t.FailNow()
	}
	return client, server
}

// Every Write arrives as one Read of the same length and bytes; Close
// reaches the peer as io.EOF.
func TestDatagramBoundaries(t *testing.T) {
	netns.Need(t)
	for _, nw := range []struct{ net, addr string }{{"dccp-udp4", "127.0.0.1:6511"}, {"dccp4", "127.0.0.1:5001"}} {
		t.Run(nw.net, func(t *testing.T) {
			c, s := pair(t, nw.net, nw.addr, &dccp.Config{CCID: 2})
			defer s.Close()
			const n = 200
			go func() {
				for i := 0; i < n; i++ {
					b := make([]byte, 8+i%300)
					binary.LittleEndian.PutUint64(b, uint64(i))
					if _, err := c.Write(b); err != nil {
						t.Error(err)
						return
					}
				}
				c.Close()
			}()
			buf := make([]byte, 2000)
			s.SetReadDeadline(time.Now().Add(20 * time.Second))
			got := 0
			for {
				k, info, err := s.ReadInfo(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				i := int(binary.LittleEndian.Uint64(buf))
				if i != got || k != 8+i%300 || info.Lost != 0 {
					t.Fatalf("packet %d: got #%d, %d bytes, lost %d", got, i, k, info.Lost)
				}
				got++
			}
			if got != n {
				t.Fatalf("received %d of %d", got, n)
			}
		})
	}
}

func TestDeadlinesAndClose(t *testing.T) {
	netns.Need(t)
	c, s := pair(t, "dccp-udp4", "127.0.0.1:6512", nil)
	defer c.Close()
	buf := make([]byte, 100)
	s.SetReadDeadline(time.Now().Add(80 * time.Millisecond))
	t0 := time.Now()
	_, err := s.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline: %v", err)
	}
	if d := time.Since(t0); d < 80*time.Millisecond || d > time.Second {
		t.Fatalf("Read returned after %v", d)
	}
	// a deadline moved while Read waits, then Close while it waits
	s.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := s.Read(buf); done <- err }()
	time.Sleep(100 * time.Millisecond)
	s.SetReadDeadline(time.Now())
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after SetReadDeadline(now): %v", err)
	}
	s.SetReadDeadline(time.Time{})
	go func() { _, err := s.Read(buf); done <- err }()
	time.Sleep(100 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Logf("Close: %v", err) // the client never answers a Close it does not read: not the test
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if _, err := c.Write(make([]byte, 1401)); !errors.Is(err, syscall.EMSGSIZE) {
		t.Fatalf("Write above the MPS: %v", err)
	}
}

// DropStale: packets queued behind the congestion window are dropped before
// they go, counted as dead, and never arrive.
func TestDropStale(t *testing.T) {
	netns.Need(t)
	c, s := pair(t, "dccp-udp4", "127.0.0.1:6513", &dccp.Config{CCID: 2, Timeout: 5 * time.Second})
	defer s.Close()
	// Bursts of writes until one outruns the congestion window (the first,
	// unless this machine is slow enough for the window to keep up).
	n, dropped := 0, 0
	for round := 0; round < 20 && dropped == 0; round++ {
		for i := 0; i < 300; i++ {
			b := make([]byte, 1000)
			binary.LittleEndian.PutUint64(b, uint64(n))
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			n++
		}
		d, err := c.DropStale(0)
		if err != nil {
			t.Fatal(err)
		}
		dropped += d
	}
	if dropped == 0 {
		t.Fatalf("DropStale dropped none of %d packets written in bursts", n)
	}
	got := 0
	s.SetReadDeadline(time.Now().Add(20 * time.Second))
	go func() {
		time.Sleep(200 * time.Millisecond)
		st, _ := c.Stats()
		if st.Dead != uint64(dropped) {
			t.Errorf("Stats().Dead = %d, dropped %d", st.Dead, dropped)
		}
		c.Close()
	}()
	buf := make([]byte, 2000)
	for {
		_, err := s.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != n-dropped {
		t.Fatalf("received %d, want %d - %d dropped", got, n, dropped)
	}
	t.Logf("%d of %d dropped as stale", dropped, n)
}

func TestDialErrors(t *testing.T) {
	netns.Need(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dccp.Dial(ctx, "dccp-udp4", "127.0.0.1:6514", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial with a cancelled context: %v", err)
	}
	_, err := dccp.Dial(context.Background(), "dccp-udp4", "127.0.0.1:6514", &dccp.Config{Timeout: 500 * time.Millisecond})
	var de *dccp.Error
	if !errors.As(err, &de) {
		t.Fatalf("Dial with nobody listening: %v", err)
	}
	if _, err := dccp.Dial(context.Background(), "tcp", "127.0.0.1:1", nil); err == nil {
		t.Fatal("Dial tcp: no error")
	}
	if _, err := dccp.Listen("dccp-udp4", "127.0.0.1:6515", &dccp.Config{CCID: 7}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Listen with CCID 7: %v", err)
	}
}

func Example() {
	l, err := dccp.Listen("dccp-udp4", "127.0.0.1:6520", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	go func() {
		c, err := dccp.Dial(context.Background(), "dccp-udp4", "127.0.0.1:6520", &dccp.Config{CCID: 3})
		if err != nil {
			return
		}
		c.Write([]byte("one"))
		c.Write([]byte("two"))
		c.Close()
	}()
	c, err := l.Accept()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	buf := make([]byte, 1500)
	for {
		n, err := c.Read(buf)
		if err != nil { // io.EOF: the peer closed
			break
		}
		fmt.Println(string(buf[:n]))
	}
	// Output:
	// one
	// two
}
