package files

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestHas: a process has files once its perf map is in a perf-map directory, once its
// jitdump is in a jitdump directory (one level down), and when it maps a jitdump; a process
// with none has none.
func TestHas(t *testing.T) {
	tmp := t.TempDir()
	pm, jd := filepath.Join(tmp, "pm"), filepath.Join(tmp, "jd")
	for _, d := range []string{pm, filepath.Join(jd, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, _, _ := startTailer(t, Config{PerfMapDirs: []string{pm}, JitdumpDirs: []string{jd}})
	pid := uint32(os.Getpid())
	if s.Has(pid) {
		t.Fatal("Has before any file was written")
	}
	perfMap := filepath.Join(pm, fmt.Sprintf("perf-%d.map", pid))
	if err := os.WriteFile(perfMap, []byte("1000 10 f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !s.Has(pid) {
		t.Error("no files found with a perf map")
	}
	os.Remove(perfMap)
	if err := os.WriteFile(filepath.Join(jd, "sub", fmt.Sprintf("jit-%d.dump", pid)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !s.Has(pid) {
		t.Error("no files found with a jitdump one level down a jitdump directory")
	}

	cmd := startJitdumpMapper(t)
	if !s.Has(uint32(cmd.Process.Pid)) {
		t.Error("no files found for a process that maps its jitdump")
	}
}
