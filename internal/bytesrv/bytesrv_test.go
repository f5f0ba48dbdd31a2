package bytesrv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The handler is tested without a network: the recorder stands for the
// connection.
func TestHandler(t *testing.T) {
	var c Counters
	h := Handler(&c)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec
	}
	r := do("GET", "/bytes/100000", "")
	if r.Code != http.StatusOK || r.Body.Len() != 100000 || r.Header().Get("Content-Length") != "100000" {
		t.Errorf("GET /bytes/100000: %d, %d bytes, Content-Length %q", r.Code, r.Body.Len(), r.Header().Get("Content-Length"))
	}
	if b := r.Body.Bytes(); b[0] != 'a' || b[25] != 'z' || b[26] != 'a' || b[65535] != 'a'+byte(65535%26) || b[65536] != 'a' {
		t.Errorf("GET /bytes: the pattern is off: %q", b[:30])
	}
	for _, bad := range []string{"/bytes/-5", "/bytes/x", "/bytes/1099511627777"} {
		if r := do("GET", bad, ""); r.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", bad, r.Code)
		}
	}
	for _, m := range []string{"PUT", "POST"} {
		if r := do(m, "/upload", strings.Repeat("x", 12345)); r.Code != http.StatusOK || r.Body.String() != "12345\n" {
			t.Errorf("%s /upload: %d %q", m, r.Code, r.Body.String())
		}
	}
	if c.Uploaded.Load() != 2*12345 || c.Uploads.Load() != 2 {
		t.Errorf("counters: %d bytes in %d uploads, want %d in 2", c.Uploaded.Load(), c.Uploads.Load(), 2*12345)
	}
	if r := do("GET", "/small", ""); r.Code != http.StatusOK || r.Body.String() != SmallBody {
		t.Errorf("GET /small: %d %q", r.Code, r.Body.String())
	}
	if r := do("GET", "/upload", ""); r.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /upload: %d, want 405", r.Code)
	}
}

// readSizes is a body that records the largest Read it was asked for.
type readSizes struct {
	r       io.Reader
	largest int
	reads   int
}

func (s *readSizes) Read(p []byte) (int, error) {
	s.largest = max(s.largest, len(p))
	s.reads++
	return s.r.Read(p)
}

// TestUploadReadsLarge: /upload reads its body UploadRead bytes at a time,
// not io.Discard's 8 KB: a 1 MB body takes a handful of Reads.
func TestUploadReadsLarge(t *testing.T) {
	h := Handler(nil)
	body := &readSizes{r: bytes.NewReader(make([]byte, 1<<20))}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("PUT", "/upload", body))
	if rec.Code != http.StatusOK || rec.Body.String() != "1048576\n" {
		t.Fatalf("PUT /upload: %d %q", rec.Code, rec.Body.String())
	}
	if body.largest != UploadRead || body.reads > (1<<20)/UploadRead+2 {
		t.Fatalf("the handler read %d times, at most %d bytes: want reads of %d", body.reads, body.largest, UploadRead)
	}
}
