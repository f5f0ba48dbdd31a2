package compare

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

// TestMakeUploadFile: the upload file holds n bytes of data in memory (no
// holes, not zeros), read through its name as curl reads it, the same bytes
// on every call; it is sparse only above uploadDataMax; Close frees it.
func TestMakeUploadFile(t *testing.T) {
	const n = 3<<20 + 12345 // a part of a block at the end
	stat := func(name string) (size, blocks int64) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(name, &st); err != nil {
			t.Fatal(err)
		}
		return st.Size, st.Blocks * 512
	}
	a, err := makeUploadFile(n)
	if err != nil {
		t.Fatal(err)
	}
	b, err := makeUploadFile(n)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() == b.Name() {
		t.Fatalf("two upload files named %s", a.Name())
	}
	da, err := os.ReadFile(a.Name())
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b.Name())
	if err != nil {
		t.Fatal(err)
	}
	if _, blocks := stat(a.Name()); len(da) != n || blocks < n {
		t.Fatalf("%d bytes, %d in memory, want %d and all of them", len(da), blocks, n)
	}
	if !bytes.Equal(da, db) {
		t.Fatal("two upload files differ")
	}
	if zeros := bytes.Count(da, []byte{0}); zeros > n/128 {
		t.Fatalf("%d zero bytes of %d: not pseudo-random data", zeros, n)
	}
	if !bytes.Equal(da[:1<<20], da[1<<20:2<<20]) {
		t.Fatal("the 1 MiB block is not repeated")
	}

	big, err := makeUploadFile(uploadDataMax + 1)
	if err != nil {
		t.Fatal(err)
	}
	if size, blocks := stat(big.Name()); size != uploadDataMax+1 || blocks > 1<<20 {
		t.Fatalf("above uploadDataMax: %d bytes, %d in memory, want %d, sparse", size, blocks, uploadDataMax+1)
	}
	for _, u := range []uploadFile{a, b, big} {
		name := u.Name()
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(name); err == nil {
			t.Fatalf("%s still open after Close", name)
		}
	}
}
