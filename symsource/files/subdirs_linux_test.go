package files

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// TestSubdirCache: one directory's listing serves every look while the directory is
// unchanged (a subdirectory's time moved since is not seen then), and is taken anew once
// an entry is added and it is subdirsMinAge old; another directory has a listing of its
// own.
func TestSubdirCache(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Join(other, "x")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	var c subdirCache
	list := func(path string) map[string]time.Time {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := map[string]time.Time{}
		for _, s := range c.list(f).subs {
			out[s.name] = s.mtime
		}
		return out
	}
	first := time.Now()
	if got := list(dir); len(got) != 1 || !got["a"].Before(first.Add(-time.Minute)) {
		t.Fatalf("listing %v, want a, an hour old", got)
	}
	// a's own time moves (a file made in it): its parent's does not.
	if err := os.Chtimes(filepath.Join(dir, "a"), first, first); err != nil {
		t.Fatal(err)
	}
	if got := list(dir); time.Since(first) < subdirsMaxAge && !got["a"].Before(first.Add(-time.Minute)) {
		t.Errorf("a second look within %v listed again: %v", subdirsMaxAge, got)
	}
	if got := list(other); len(got) != 1 || got["x"].IsZero() {
		t.Errorf("the other directory's listing %v, want x", got)
	}
	if err := os.Mkdir(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(subdirsMinAge) // a directory that changed is listed again, but not at once
	got := list(dir)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"a", "b"}) || got["a"].Before(first.Add(-time.Minute)) {
		t.Errorf("after b was made: %v, want a (its new time) and b", got)
	}
}

// TestSubdirsChanged: a target is given the subdirectories (and symlinks) of its user or
// root that changed since it started, then those that changed since the listing it saw
// last; not another user's.
func TestSubdirsChanged(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	dir := t.TempDir()
	now := time.Now()
	at := func(name string, ago time.Duration) string {
		t.Helper()
		path := filepath.Join(dir, name)
		ts := []unix.Timespec{unix.NsecToTimespec(now.Add(-ago).UnixNano()), unix.NsecToTimespec(now.Add(-ago).UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, name := range []string{"before", "mine", "other"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("mine", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	at("before", 2*time.Hour)
	at("mine", 30*time.Minute)
	at("link", 30*time.Minute)
	if err := os.Chown(at("other", 30*time.Minute), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	tgt, err := newTarget(uint32(os.Getpid()), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	tgt.started = now.Add(-time.Hour)
	var c subdirCache
	changed := func() []string {
		t.Helper()
		names, truncated := tgt.subdirsChanged(&c, true, dir)
		if truncated {
			t.Error("a listing of four entries is truncated")
		}
		slices.Sort(names)
		return names
	}
	if got := changed(); !slices.Equal(got, []string{"link", "mine"}) {
		t.Errorf("first listing: %v, want link and mine (changed since the start, root's)", got)
	}
	if got := changed(); len(got) != 0 {
		t.Errorf("second listing: %v, want none (nothing changed)", got)
	}
	at("before", 0) // a file made in it
	time.Sleep(subdirsMaxAge)
	if got := changed(); !slices.Equal(got, []string{"before"}) {
		t.Errorf("after before changed: %v, want before", got)
	}
}

// TestSubdirListingBounded: a directory of more entries than maxSubdirEntries is listed in
// part, and says so.
func TestSubdirListingBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range maxSubdirEntries + 10 {
		if err := os.Mkdir(filepath.Join(dir, strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c subdirCache
	if l := c.list(f); !l.truncated || len(l.subs) != maxSubdirEntries {
		t.Errorf("listing of %d subdirectories: %d listed, truncated %v; want %d, truncated", maxSubdirEntries+10, len(l.subs), l.truncated, maxSubdirEntries)
	}
}

// TestSubdirsOfFIFO: a FIFO where a host jitdump directory should be (a target may make
// DIR/.debug/jit when it may write DIR) is no directory to list, and does not block the look.
func TestSubdirsOfFIFO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jit")
	if err := unix.Mkfifo(dir, 0o644); err != nil {
		t.Fatal(err)
	}
	tgt, err := newTarget(uint32(os.Getpid()), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	done := make(chan []string, 1)
	go func() {
		names, _ := tgt.subdirsChanged(&subdirCache{}, true, dir)
		done <- names
	}()
	select {
	case names := <-done:
		if len(names) != 0 {
			t.Errorf("a FIFO listed: %v", names)
		}
	case <-time.After(5 * time.Second):
		if fd, err := unix.Open(dir, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			defer unix.Close(fd)
		}
		<-done
		t.Fatal("the look blocked for 5 s")
	}
}
