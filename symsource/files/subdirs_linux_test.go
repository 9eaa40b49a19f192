package files

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSubdirCache: one directory's listing serves every look while the directory is
// unchanged (a subdirectory's time moved since is not seen then), and is taken anew once
// an entry is added; another directory has a listing of its own.
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
		for _, s := range c.list(f) {
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
	got := list(dir)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"a", "b"}) || got["a"].Before(first.Add(-time.Minute)) {
		t.Errorf("after b was made: %v, want a (its new time) and b", got)
	}
}
