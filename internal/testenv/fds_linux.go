package testenv

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
)

// FDs is what a process's open file descriptors name, by number.
type FDs map[int]string

// OpenFDs lists the test process's open file descriptors, less the one that reads the list.
func OpenFDs(t testing.TB) FDs {
	t.Helper()
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	fds := make(FDs, len(names))
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd == int(dir.Fd()) {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil {
			continue // closed since the list was read
		}
		fds[fd] = target
	}
	return fds
}

// NewSince describes each fd in fds that was not open, to the same file, in before. Other
// fds may close in between (the collector finalises files that earlier tests let go of), so
// a leak is an fd open now that was not before, never a change in their number.
func (fds FDs) NewSince(before FDs) []string {
	var added []string
	for fd, target := range fds {
		if before[fd] != target {
			added = append(added, fmt.Sprintf("%d -> %s", fd, target))
		}
	}
	sort.Strings(added)
	return added
}
