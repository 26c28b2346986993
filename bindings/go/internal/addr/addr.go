// SPDX-License-Identifier: MIT

// Package addr splits a netip.AddrPort into what the C shims' struct
// gcgo_member (gcgo.h) holds, for package groupcast and package dccp.
package addr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Parts is an address as struct gcgo_member holds it.
type Parts struct {
	Family byte     // 4 or 6
	Addr   [16]byte // network order; IPv4 in Addr[0:4]
	Port   uint16
	Scope  uint32 // IPv6 scope id, from the zone (a number or an interface name)
}

// Split returns a's parts; a v4-mapped IPv6 address is taken as IPv4.
func Split(a netip.AddrPort) (Parts, error) {
	var p Parts
	ip := a.Addr()
	if !ip.IsValid() {
		return p, errors.New("invalid address")
	}
	ip = ip.Unmap()
	p.Port = a.Port()
	if ip.Is4() {
		p.Family = 4
		b := ip.As4()
		copy(p.Addr[:], b[:])
		return p, nil
	}
	p.Family = 6
	p.Addr = ip.As16()
	if z := ip.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			p.Scope = uint32(n)
		} else if ifi, err := net.InterfaceByName(z); err == nil {
			p.Scope = uint32(ifi.Index)
		} else {
			return p, fmt.Errorf("%v: zone %q: %w", a, z, err)
		}
	}
	return p, nil
}
