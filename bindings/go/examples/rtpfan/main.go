// SPDX-License-Identifier: MIT

// Command rtpfan fans one RTP stream out to the subscribers listed in a
// file, each with its own SSRC: the RTP header is each subscriber's
// prepend, the rest of the packet is shared (Group.SendGroup).
//
//	rtpfan -in 10.0.0.1:5004 -subs subs.txt [-engine auto]
//
// subs.txt has one subscriber a line, "ADDR:PORT SSRC" (SSRC decimal or
// 0x hex; # starts a comment).  SIGHUP reloads it; a file that does not
// parse leaves the old list in place.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"groupcast"
)

type sub struct {
	addr netip.AddrPort
	ssrc uint32
}

func load(path string) ([]sub, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var subs []sub
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		if len(fs) != 2 {
			return nil, fmt.Errorf("%s:%d: want ADDR:PORT SSRC", path, n)
		}
		a, err := netip.ParseAddrPort(fs[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		s, err := strconv.ParseUint(fs[1], 0, 32)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: ssrc: %w", path, n, err)
		}
		subs = append(subs, sub{a, uint32(s)})
	}
	return subs, sc.Err()
}

func main() {
	in := flag.String("in", "", "ADDR:PORT to receive RTP on")
	path := flag.String("subs", "", "subscriber file: ADDR:PORT SSRC per line")
	engine := flag.String("engine", "auto", "auto, loop, mmsg, uring, uring_zc or kernel")
	flag.Parse()
	eng, err := groupcast.ParseEngine(*engine)
	if err != nil {
		log.Fatal(err)
	}
	subs, err := load(*path)
	if err != nil {
		log.Fatal(err)
	}
	var cur atomic.Value
	cur.Store(subs)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if s, err := load(*path); err != nil {
				log.Printf("reload: %v (keeping %d subscribers)", err, len(cur.Load().([]sub)))
			} else {
				cur.Store(s)
				log.Printf("reload: %d subscribers", len(s))
			}
		}
	}()

	laddr, err := net.ResolveUDPAddr("udp", *in)
	if err != nil {
		log.Fatal(err)
	}
	c, err := net.ListenUDP("udp", laddr)
	if err != nil {
		log.Fatal(err)
	}
	g, err := groupcast.Attach(c)
	if err != nil {
		log.Fatal(err)
	}
	if err := g.SetEngine(eng); err != nil {
		log.Fatal(err)
	}
	e, _ := g.Engine()
	log.Printf("rtpfan: %v -> %d subscribers, engine %v", c.LocalAddr(), len(subs), e)

	var recs []groupcast.Recipient
	var hdrs []byte
	var failed uint64
	buf := make([]byte, 65536)
	for {
		n, err := c.Read(buf)
		if err != nil {
			log.Fatal(err)
		}
		if n < 12 || buf[0]>>6 != 2 {
			continue // not RTP version 2
		}
		s := cur.Load().([]sub)
		if cap(hdrs) < 12*len(s) {
			hdrs = make([]byte, 12*len(s))
		}
		recs = recs[:0]
		for i, sb := range s {
			h := hdrs[12*i : 12*i+12]
			copy(h, buf[:12])
			binary.BigEndian.PutUint32(h[8:], sb.ssrc)
			recs = append(recs, groupcast.Recipient{Addr: sb.addr, Prepend: h})
		}
		if _, errs := g.SendGroup(buf[12:n], recs); errs != nil {
			for _, err := range errs {
				var me groupcast.MemberError
				if errors.As(err, &me) && failed%1000 == 0 {
					log.Printf("%v (%d failed so far)", err, failed+1)
				}
				if err != nil {
					failed++
				}
			}
		}
	}
}
