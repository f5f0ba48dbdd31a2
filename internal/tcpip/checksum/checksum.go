// Package checksum computes the Internet checksum (RFC 1071): the 16-bit
// one's complement sum of a buffer taken as big-endian 16-bit words.
//
// Its identifiers are those of gVisor's tcpip/checksum, which tcpwheel used
// before.
package checksum

import (
	"encoding/binary"
	"math/bits"
)

// Checksum returns the one's complement sum of buf's 16-bit words, added to
// initial (not inverted). A buffer of odd length is padded with a zero byte.
// initial must be a sum over an even number of bytes.
//
// The sum is taken over little-endian 32-bit words and swapped back at the
// end: the one's complement sum does not depend on byte order (RFC 1071
// section 2(B)).
func Checksum(buf []byte, initial uint16) uint16 {
	// 32-bit words summed into four independent 64-bit accumulators: no
	// carries to track (each would take 2^32 words to overflow) and four adds
	// in flight at once.
	s0, s1, s2, s3 := uint64(bits.ReverseBytes16(initial)), uint64(0), uint64(0), uint64(0)
	for len(buf) >= 32 {
		w := buf[:32:32] // one bounds check for the eight loads
		s0 += uint64(binary.LittleEndian.Uint32(w[0:4])) + uint64(binary.LittleEndian.Uint32(w[16:20]))
		s1 += uint64(binary.LittleEndian.Uint32(w[4:8])) + uint64(binary.LittleEndian.Uint32(w[20:24]))
		s2 += uint64(binary.LittleEndian.Uint32(w[8:12])) + uint64(binary.LittleEndian.Uint32(w[24:28]))
		s3 += uint64(binary.LittleEndian.Uint32(w[12:16])) + uint64(binary.LittleEndian.Uint32(w[28:32]))
		buf = buf[32:]
	}
	for len(buf) >= 8 {
		s0 += uint64(binary.LittleEndian.Uint32(buf))
		s1 += uint64(binary.LittleEndian.Uint32(buf[4:]))
		buf = buf[8:]
	}
	var tail uint64 // the last 0 to 7 bytes, little-endian
	switch {
	case len(buf) >= 4:
		tail = uint64(binary.LittleEndian.Uint32(buf))
		buf = buf[4:]
		if len(buf) >= 2 {
			tail |= uint64(binary.LittleEndian.Uint16(buf)) << 32
			buf = buf[2:]
		}
		if len(buf) == 1 {
			tail |= uint64(buf[0]) << 48
		}
	case len(buf) >= 2:
		tail = uint64(binary.LittleEndian.Uint16(buf))
		if len(buf) == 3 {
			tail |= uint64(buf[2]) << 16
		}
	case len(buf) == 1:
		tail = uint64(buf[0])
	}
	acc, c := bits.Add64(s0+s1, s2+s3, 0)
	acc, c = bits.Add64(acc, tail, c)
	acc += c // cannot carry again: the sums are far below 2^64
	// Fold 64 -> 32 -> 16 bits, end-around carry each time.
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	return bits.ReverseBytes16(uint16(acc))
}

// Combine returns the one's complement sum of two checksums. a must have been
// computed over an even number of bytes.
func Combine(a, b uint16) uint16 {
	v := uint32(a) + uint32(b)
	return uint16(v + v>>16)
}
