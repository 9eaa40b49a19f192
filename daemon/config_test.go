package daemon

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The target bounds default with --all or --jit-image alone: --max-memory-mb's share, a
// quarter of it for one user; set with --pid alone, they are an error.
func TestTargetBoundDefaults(t *testing.T) {
	c := Config{All: true, MaxMemoryBytes: 256 << 20}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := DefaultMaxTargets(256 << 20); c.MaxTargets != want || c.MaxTargetsPerUser != want/4 {
		t.Errorf("--all: MaxTargets %d, per user %d; want %d, %d", c.MaxTargets, c.MaxTargetsPerUser, want, want/4)
	}
	p := Config{Pids: []uint32{1}}
	if err := p.Validate(); err != nil || p.MaxTargets != 0 || p.MaxTargetsPerUser != 0 {
		t.Errorf("--pid: MaxTargets %d, per user %d (%v); want no bound", p.MaxTargets, p.MaxTargetsPerUser, err)
	}
	p = Config{Pids: []uint32{1}, MaxTargetsPerUser: 5}
	if err := p.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("--pid with --max-targets-per-user: %v, want a configuration error", err)
	}
}

// The default number of targets stays within the descriptors profd may open.
func TestDefaultMaxTargetsWithinDescriptors(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &lim) })
	if lim.Max != unix.RLIM_INFINITY && lim.Max < 1<<20 {
		if got, byMemory := DefaultMaxTargets(1<<40), int(min(1<<40/targetCostBytes, 1<<31-1)); got >= byMemory {
			t.Errorf("DefaultMaxTargets of a large memory = %d: not bound by %d descriptors", got, lim.Cur)
		}
	}
	low := unix.Rlimit{Cur: 1280, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	if got, want := DefaultMaxTargets(2<<30), (1280-reservedFDs)/fdsPerTarget; got != want {
		t.Errorf("DefaultMaxTargets with 1 280 descriptors = %d, want %d", got, want)
	}
	if got, want := DefaultMaxTargets(8<<20), 8<<20/targetCostBytes; got != want {
		t.Errorf("DefaultMaxTargets of 8 MiB = %d, want %d (the memory's bound, the smaller)", got, want)
	}
}
