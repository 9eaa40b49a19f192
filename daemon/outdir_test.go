package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/profd/profd/internal/testenv"
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

// TestOutDirOtherOwner: an --out another user owns, or its group may write, is warned
// about (they may replace what profd writes and deletes there as root); an intervals
// directory that is a link is refused.
func TestOutDirOtherOwner(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	base := t.TempDir()
	for _, c := range []struct {
		name string
		uid  int
		mode os.FileMode
		warn bool
	}{{"profd's", 0, 0o755, false}, {"another user's", 65534, 0o755, true}, {"group-writable", 0, 0o775, true}} {
		dir := filepath.Join(base, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, c.uid, c.uid); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		warnOutMode(dir, slog.New(slog.NewTextHandler(&logs, nil)))
		if got := strings.Contains(logs.String(), "belongs to another user, or its group may write it"); got != c.warn {
			t.Errorf("%s --out: warned %v, want %v:\n%s", c.name, got, c.warn, logs.String())
		}
	}
	out := filepath.Join(base, "linked")
	if err := os.Mkdir(out, 0o711); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(out, IntervalDir)); err != nil {
		t.Fatal(err)
	}
	if err := makeIntervalDir(out, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrConfig) {
		t.Errorf("an intervals directory that is a link: %v, want ErrConfig", err)
	}
}
