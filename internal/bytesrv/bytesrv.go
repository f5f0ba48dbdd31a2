// Package bytesrv is the HTTP server that every stack serves in `tcpwheel
// compare`'s real-client scenarios and that `tcpwheel run` serves: the same
// handler on whatever listener the stack gives, so that the stacks differ
// only below net.Listener.
//
//	GET /bytes/N   N bytes of a repeating pattern (N up to MaxBytes)
//	PUT /upload    reads the body to its end; answers with its length
//	POST /upload   the same
//	GET /small     a short response (SmallBody): the request-rate scenarios'
package bytesrv

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// MaxBytes bounds GET /bytes/N.
const MaxBytes = 1 << 40

// SmallBody is what GET /small answers.
const SmallBody = "tcpwheel: hello\n"

// Counters count what the handler served. Its fields are safe for
// concurrent use.
type Counters struct {
	// Uploaded is the sum of the bodies /upload read in full.
	Uploaded atomic.Int64
	// Uploads is how many /upload requests read their body in full.
	Uploads atomic.Int64
}

// UploadRead is the size of the upload handler's reads. io.Copy to
// io.Discard reads 8 KB at a time: 25,600 Reads for compare's 200 MB upload,
// each a lock of the stack's Conn and, on a TCP socket, a system call. A
// read of up to 256 KB (a receive window's worth, tcp.DefaultRecvBuffer)
// takes what came in one call.
const UploadRead = 256 << 10

// Register adds the handler's routes to mux; c, if not nil, counts uploads.
func Register(mux *http.ServeMux, c *Counters) {
	mux.HandleFunc("GET /bytes/{n}", serveBytes)
	// The read buffers, kept for the next upload (the pool is the handler's,
	// not the package's: no package-level state).
	bufs := sync.Pool{New: func() any { b := make([]byte, UploadRead); return &b }}
	upload := func(w http.ResponseWriter, r *http.Request) {
		buf := bufs.Get().(*[]byte)
		n, err := discard(r.Body, *buf)
		bufs.Put(buf)
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if c != nil {
			c.Uploaded.Add(n)
			c.Uploads.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, strconv.FormatInt(n, 10)+"\n")
	}
	mux.HandleFunc("PUT /upload", upload)
	mux.HandleFunc("POST /upload", upload)
	mux.HandleFunc("GET /small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, SmallBody)
	})
}

// discard reads r to its end into buf, and returns the count read.
func discard(r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Handler returns a handler with only the routes of Register.
func Handler(c *Counters) http.Handler {
	mux := http.NewServeMux()
	Register(mux, c)
	return mux
}

// serveBytes streams N bytes: the lowercase alphabet over and over, starting
// again at a every 64 KiB (one write each).
func serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 || n > MaxBytes {
		http.Error(w, "N must be an integer in [0, 2^40]", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}
