package outfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

func TestSafeName(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"lli-14", 0, "lli-14"},
		{"../etc/passwd", 0, ".._etc_passwd"},
		{"a b\x00c/é", 0, "a_b_c__"},
		{"..", 0, "__"},
		{strings.Repeat("x", 300), 100, strings.Repeat("x", 100)},
	} {
		if got := SafeName(c.in, c.max); got != c.want {
			t.Errorf("SafeName(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// TestWrite: a written file has its content and mode, an encoder's error leaves the old file
// and no temporary file behind.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := Write(path, 0o640, func(w io.Writer) error { _, err := io.WriteString(w, "first"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o640, func(w io.Writer) error { io.WriteString(w, "partial"); return boom })
	var ee *EncodeError
	if !errors.As(err, &ee) || !errors.Is(err, boom) {
		t.Errorf("encoder error: %v", err)
	}
	data, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(data) != "first" || st.Mode().Perm() != 0o640 {
		t.Errorf("file %q mode %v, want the first content, 0640", data, st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d entries left in the directory, want 1", len(entries))
	}
}

// TestWriteOwned: the file belongs to the owner asked for, with the mode asked for, and so
// did its temporary file before the rename.
func TestWriteOwned(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	var during os.FileInfo
	err := WriteOwned(path, 0o600, Owner{UID: 65534, GID: 65534}, func(w io.Writer) error {
		entries, _ := os.ReadDir(dir)
		if len(entries) == 1 {
			during, _ = entries[0].Info()
		}
		_, err := io.WriteString(w, "mine")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for what, info := range map[string]os.FileInfo{"file": mustStat(t, path), "temporary file": during} {
		if info == nil {
			t.Fatalf("no %s seen", what)
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != 0o600 || st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s mode %v owner %d:%d, want 0600 65534:65534", what, info.Mode().Perm(), st.Uid, st.Gid)
		}
	}
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestLink: Link replaces an existing file with a link to another, leaving no temporary
// file, and the name keeps the linked file after the original is removed.
func TestLink(t *testing.T) {
	dir := t.TempDir()
	a, latest := filepath.Join(dir, "a"), filepath.Join(dir, "latest")
	if err := os.WriteFile(a, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(latest, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Link(a, latest); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(latest); err != nil || string(b) != "new" {
		t.Errorf("latest holds %q (%v), want the linked file's bytes", b, err)
	}
	if n, _, err := RemoveStale(dir); err != nil || n != 0 {
		t.Errorf("Link left %d temporary files (%v)", n, err)
	}
	if err := Link(filepath.Join(dir, "missing"), latest); err == nil {
		t.Errorf("Link of a missing file succeeded")
	}
}
