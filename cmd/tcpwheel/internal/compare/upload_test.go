package compare

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

// TestMakeUploadFile: the upload file holds n bytes of data on the disk (no
// holes, not zeros), the same bytes on every call, and is sparse only above
// uploadDataMax.
func TestMakeUploadFile(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	const n = 3<<20 + 12345 // a part of a block at the end
	onDisk := func(name string) (size, blocks int64) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(name, &st); err != nil {
			t.Fatal(err)
		}
		return st.Size, st.Blocks * 512
	}
	read := func(name string) ([]byte, int64) {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		_, blocks := onDisk(name)
		return b, blocks
	}
	a, err := makeUploadFile(n)
	if err != nil {
		t.Fatal(err)
	}
	b, err := makeUploadFile(n)
	if err != nil {
		t.Fatal(err)
	}
	da, blocks := read(a)
	db, _ := read(b)
	if len(da) != n || blocks < n {
		t.Fatalf("%d bytes, %d on the disk, want %d and all of them", len(da), blocks, n)
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
	if size, blocks := onDisk(big); size != uploadDataMax+1 || blocks > 1<<20 {
		t.Fatalf("above uploadDataMax: %d bytes, %d on the disk, want %d, sparse", size, blocks, uploadDataMax+1)
	}
	for _, name := range []string{a, b, big} {
		os.Remove(name)
	}
}
