// SPDX-License-Identifier: MIT

// Command bindings_go times one method of sending the same datagram to N
// members from Go, for bench/bindings_go.py: "loop" (WriteToUDPAddrPort per
// member) or "group" (groupcast.Group.Send on -engine).  It prints the
// process CPU (getrusage: every thread, the Go runtime's too) spent in the
// sends, per group send, as JSON.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"groupcast"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	method := flag.String("method", "group", "loop or group")
	engine := flag.String("engine", "kernel", "engine of -method group")
	dst := flag.String("dst", "", "first member ADDR:PORT; members are PORT..PORT+n-1")
	n := flag.Int("n", 1000, "members")
	size := flag.Int("size", 1000, "payload bytes")
	sends := flag.Int("sends", 300, "group sends")
	pace := flag.Duration("pace", 0, "sleep between sends (the receiver's queues drain; sleep costs no CPU)")
	flag.Parse()
	first := netip.MustParseAddrPort(*dst)
	members := make([]netip.AddrPort, *n)
	for i := range members {
		members[i] = netip.AddrPortFrom(first.Addr(), first.Port()+uint16(i))
	}
	c, err := net.ListenUDP("udp4", nil)
	if err != nil {
		log.Fatal(err)
	}
	c.SetWriteBuffer(8 << 20)
	buf := make([]byte, *size)
	var send func() error
	switch *method {
	case "loop":
		send = func() error {
			for _, m := range members {
				if _, err := c.WriteToUDPAddrPort(buf, m); err != nil {
					return err
				}
			}
			return nil
		}
	case "group":
		g, err := groupcast.Attach(c)
		if err != nil {
			log.Fatal(err)
		}
		e, err := groupcast.ParseEngine(*engine)
		if err != nil {
			log.Fatal(err)
		}
		if err := g.SetEngine(e); err != nil {
			log.Fatal(err)
		}
		if err := g.SetGroup(members); err != nil {
			log.Fatal(err)
		}
		send = func() error { return g.Send(buf) }
	default:
		log.Fatalf("-method %q: loop or group", *method)
	}
	send() // warm up: routes, the engine's maps
	// CPU is summed over the sends alone, not the sleeps between them (a
	// sleep wakes the Go scheduler, which is no cost of the send)
	var spent time.Duration
	w0 := time.Now()
	for i := 0; i < *sends; i++ {
		t0 := cpu()
		if err := send(); err != nil {
			log.Fatal(err)
		}
		spent += cpu() - t0
		if *pace > 0 {
			time.Sleep(*pace)
		}
	}
	json.NewEncoder(os.Stdout).Encode(map[string]float64{
		"cpu_us_per_send":  float64(spent) / float64(time.Microsecond) / float64(*sends),
		"wall_us_per_send": float64(time.Since(w0)) / float64(time.Microsecond) / float64(*sends),
	})
}
