package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockExcludesASecondWriter(t *testing.T) {
	dir := t.TempDir()
	first, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A second open file description conflicts with the first as another process's would.
	_, err = Lock(dir)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Lock: %v, want ErrInUse naming pid %d", err, os.Getpid())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	again.Close()
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(".lli-1.prof.txt.tmp-123456", 100)
	write(".lli-1.profd.tmp-9", 20)
	write("lli-1.prof.txt", 7)         // an output
	write(".lli-1.prof.txt.tmp-x", 5)  // not Write's pattern
	write("lli-1.prof.txt.tmp-123", 5) // not hidden: not Write's
	write(LockName, 0)
	// A temporary file Write makes now, and is killed before renaming, has the pattern too.
	tmp, err := os.CreateTemp(dir, ".x.pb.gz.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Write([]byte("abc"))
	tmp.Close()
	n, bytes, err := RemoveStale(dir)
	if err != nil || n != 3 || bytes != 123 {
		t.Fatalf("RemoveStale = %d files, %d bytes, %v; want 3, 123, nil", n, bytes, err)
	}
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".lli-1.prof.txt.tmp-x .profd.lock lli-1.prof.txt lli-1.prof.txt.tmp-123" {
		t.Errorf("left %q", names)
	}
}
