package testenv

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Cgroup makes the cgroup v2 directory name (a path relative to the hierarchy's root, its
// parents made too) and returns it open: a process started with SysProcAttr.UseCgroupFD
// and its fd runs in it from its first instruction. The test's cleanup removes the
// directories it made, deepest first, once the test's later cleanups (which kill what runs
// in them) are done. It skips the test when no cgroup v2 hierarchy is mounted read-write.
func Cgroup(t testing.TB, name string) *os.File {
	t.Helper()
	mount := Cgroup2Mount(t)
	var made []string
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if err := os.Remove(made[i]); err != nil {
				t.Errorf("remove the test's cgroup: %v", err)
			}
		}
	})
	dir := mount
	for _, part := range strings.Split(filepath.Clean(name), "/") {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("cgroup v2 at %s is not writable: %v", mount, err)
		}
		made = append(made, dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Cgroup2Mount is where this process's mount namespace has the cgroup v2 hierarchy's root,
// read-write; it skips the test when there is none.
func Cgroup2Mount(t testing.TB) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER"
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 5 &&
				strings.HasPrefix(fields[5], "rw") && fields[3] == "/" {
				return fields[4]
			}
		}
	}
	t.Skip("no cgroup v2 hierarchy mounted read-write")
	return ""
}
