package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOutDirMode: profd makes a missing --out 0711 whatever the umask, leaves an existing
// one's mode alone, and warns about one anyone may write to without the sticky bit.
func TestOutDirMode(t *testing.T) {
	base := t.TempDir()
	made := filepath.Join(base, "made")
	old := syscall.Umask(0o077) // would take the others' search bit
	err := checkWritable(made)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o700, false}, {0o755, false}, {0o777, true}, {0o777 | os.ModeSticky, false}} {
		dir := filepath.Join(base, c.mode.String())
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		if err := checkWritable(dir); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		warnOutMode(dir, slog.New(slog.NewTextHandler(&logs, nil)))
		if got := strings.Contains(logs.String(), "world-writable"); got != c.warn {
			t.Errorf("--out mode %v: warned %v, want %v:\n%s", c.mode, got, c.warn, logs.String())
		}
		if st, _ := os.Stat(dir); st.Mode()&(os.ModePerm|os.ModeSticky) != c.mode {
			t.Errorf("--out mode %v became %v", c.mode, st.Mode())
		}
	}
	if st, err := os.Stat(made); err != nil || st.Mode().Perm() != outDirPerm {
		t.Errorf("--out profd made: %v, %v; want mode 0711", st.Mode(), err)
	}
}
