package checksum

import (
	"math/rand/v2"
	"testing"
)

// reference is RFC 1071's loop, word by word in network byte order.
func reference(buf []byte, initial uint16) uint16 {
	sum := uint32(initial)
	for i := 0; i+1 < len(buf); i += 2 {
		sum += uint32(buf[i])<<8 | uint32(buf[i+1])
	}
	if len(buf)%2 == 1 {
		sum += uint32(buf[len(buf)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

func TestKnownPackets(t *testing.T) {
	for _, c := range []struct {
		name string
		buf  []byte
		want uint16 // the inverted sum, as it goes on the wire
	}{
		// RFC 1071 section 3's example: the sum is 0xddf2.
		{"rfc1071", []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, ^uint16(0xddf2)},
		// An IPv4 header (Wikipedia's example), checksum field zeroed: 0xb861.
		{"ipv4", []byte{
			0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
		}, 0xb861},
		{"empty", nil, 0xffff},
		{"odd", []byte{0xab}, ^uint16(0xab00)},
	} {
		if got := ^Checksum(c.buf, 0); got != c.want {
			t.Errorf("%s: ^Checksum = %#04x, want %#04x", c.name, got, c.want)
		}
	}
}

// TestAgainstReference compares every length up to 200 bytes, every
// alignment, and random initial values, including all-0xff buffers that
// make the 64-bit accumulator carry.
func TestAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 208)
	for fill := 0; fill < 3; fill++ {
		for i := range buf {
			switch fill {
			case 0:
				buf[i] = byte(r.Uint32())
			case 1:
				buf[i] = 0xff
			case 2:
				buf[i] = 0
			}
		}
		for off := 0; off < 8; off++ {
			for n := 0; n <= 200; n++ {
				for _, init := range []uint16{0, 0xffff, uint16(r.Uint32())} {
					b := buf[off : off+n]
					if got, want := Checksum(b, init), reference(b, init); got != want {
						t.Fatalf("fill %d off %d len %d initial %#x: %#04x, want %#04x", fill, off, n, init, got, want)
					}
				}
			}
		}
	}
}

func TestCombine(t *testing.T) {
	a := []byte{1, 2, 3, 4, 5, 6}
	b := []byte{0xff, 0xfe, 0x80, 0x01, 7}
	whole := append(append([]byte{}, a...), b...)
	if got, want := Combine(Checksum(a, 0), Checksum(b, 0)), Checksum(whole, 0); got != want {
		t.Errorf("Combine = %#04x, want %#04x", got, want)
	}
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff}, uint16(0xffff))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, init uint16) {
		got, want := Checksum(b, init), reference(b, init)
		if got != want {
			t.Fatalf("Checksum(%x, %#x) = %#04x, want %#04x", b, init, got, want)
		}
	})
}

func BenchmarkChecksum1500(b *testing.B) {
	buf := make([]byte, 1500)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		Checksum(buf, 0)
	}
}
