package tcp

// buffer is a byte queue: data is appended at the end and consumed from the
// front, and the storage is reused.
type buffer struct {
	b   []byte
	off int
}

func (b *buffer) len() int           { return len(b.b) - b.off }
func (b *buffer) consume(n int)      { b.off += n; b.compact() }
func (b *buffer) at(i, n int) []byte { return b.b[b.off+i : b.off+i+n] }

func (b *buffer) compact() {
	if b.off == len(b.b) {
		b.b, b.off = b.b[:0], 0
	}
}

func (b *buffer) write(p []byte) {
	if b.off > 0 && cap(b.b)-len(b.b) < len(p) {
		n := copy(b.b, b.b[b.off:])
		b.b, b.off = b.b[:n], 0
	}
	b.b = append(b.b, p...)
}

func (b *buffer) read(p []byte) int {
	n := copy(p, b.b[b.off:])
	b.consume(n)
	return n
}
