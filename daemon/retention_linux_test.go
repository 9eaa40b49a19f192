package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestRetentionFailureWarnedOnce: deletions that fail (a read-only interval directory) are
// warned about once, not at every flush, and again after deleting has worked in between.
func TestRetentionFailureWarnedOnce(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	out := t.TempDir()
	dir := filepath.Join(out, IntervalDir)
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	remount := func(flags uintptr) {
		t.Helper()
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|flags, "size=1m"); err != nil {
			t.Fatalf("remount: %v", err)
		}
	}
	old := func() {
		t.Helper()
		for _, f := range []Format{FormatPprof, FormatCapture} {
			if err := os.WriteFile(intervalPath(dir, "a-1", time.Now().Add(-48*time.Hour), f), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	var logs testenv.SyncBuffer
	d := &daemonRun{cfg: Config{OutDir: out, Keep: Retention{Age: time.Hour}}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	const warning = "old interval files not deleted"

	old()
	remount(syscall.MS_RDONLY)
	for range 3 {
		d.applyRetention()
	}
	if n := linesWith(logs.String(), warning); n != 1 {
		t.Fatalf("%d warnings over 3 failing passes, want 1:\n%s", n, logs.String())
	}
	remount(0)
	d.applyRetention()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files left once the directory is writable again", len(entries))
	}
	old()
	remount(syscall.MS_RDONLY)
	d.flushing.retained.loaded = false // read the directory again: these files were not noted
	d.applyRetention()
	if n := linesWith(logs.String(), warning); n != 2 {
		t.Errorf("%d warnings, want a second one for the second episode:\n%s", n, logs.String())
	}
}
