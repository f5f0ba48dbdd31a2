//go:build linux

package tun

import (
	"encoding/binary"
	"testing"
)

func TestIPPacketSize(t *testing.T) {
	v4 := make([]byte, 32) // an option-less IPv4 header and 12 bytes of payload
	v4[0] = 4<<4 | 5
	binary.BigEndian.PutUint16(v4[2:], uint16(len(v4)))
	v6 := make([]byte, 48)
	v6[0] = 6 << 4
	v6[5] = 8
	for _, tc := range []struct {
		name string
		p    []byte
		want int
	}{
		{"IPv4", v4, 32},
		{"IPv4 header only", v4[:20], 32},
		{"IPv4 cut short", v4[:19], -1},
		{"IPv6", v6, 48},
		{"IPv6 cut short", v6[:39], -1},
		{"garbage", make([]byte, 60), -1},
	} {
		if got := ipPacketSize(tc.p); got != tc.want {
			t.Errorf("%s: ipPacketSize = %d, want %d", tc.name, got, tc.want)
		}
	}
}
