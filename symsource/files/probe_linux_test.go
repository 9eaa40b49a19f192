package files

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
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

// TestProbeRereadsMapsOnChange: a probe reads a process's maps again only when its address
// space changed size, so asking again of a JIT that has mapped nothing new reads no maps,
// and a jitdump mapped after the probe was made is found at the next ask.
func TestProbeRereadsMapsOnChange(t *testing.T) {
	s, _, _ := startTailer(t, Config{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMapsJitdump$")
	cmd.Env = append(os.Environ(), "PROFD_FILES_HELPER="+t.TempDir(), "PROFD_FILES_HELPER_LATE=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	lines := startReady(t, cmd)
	pr, err := s.NewProbe(uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if pr.Has() {
		t.Fatal("files found before the helper mapped its jitdump")
	}
	if pr.t.mapsReadAt.IsZero() {
		t.Fatal("the first ask read no maps")
	}
	// The helper's Go runtime may still map memory of its own (a thread's stack, heap),
	// which rightly makes an ask read the maps again: ask until its size held through one.
	pid := uint32(cmd.Process.Pid)
	for try := 0; ; try++ {
		read, pages := pr.t.mapsReadAt, pr.t.mapsPages
		before, err := procfs.VMPages(pid)
		if err != nil {
			t.Fatal(err)
		}
		has := pr.Has()
		after, _ := procfs.VMPages(pid)
		if has {
			t.Fatal("files found before the helper mapped its jitdump")
		}
		if before != pages || after != pages {
			if try == 100 {
				t.Fatalf("the helper's address space never held its size through an ask (%d, %d, %d pages)", pages, before, after)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if pr.t.mapsReadAt != read {
			t.Errorf("an ask, nothing mapped since, read the maps again (at %v, before at %v)", pr.t.mapsReadAt, read)
		}
		break
	}
	fmt.Fprintln(in, "map")
	if line, err := lines.ReadString('\n'); err != nil || line != "mapped\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	if !pr.Has() {
		t.Error("the jitdump mapped after the probe was made was not found")
	}
}

// TestHasOfAnotherUser: a process of another user than profd's has files once its jitdump
// is in a subdirectory of a jitdump directory that it, as that user, made.
func TestHasOfAnotherUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	jd := t.TempDir()
	s, _, _ := startTailer(t, Config{JitdumpDirs: []string{jd}})
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	time.Sleep(10 * time.Millisecond) // its subdirectory is made after it started
	sub := filepath.Join(jd, "llvm-IR-jit-nobody")
	dump := filepath.Join(sub, fmt.Sprintf("jit-%d.dump", pid))
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sub, dump} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Has(uint32(pid)) {
		t.Error("no files found for a process of uid 65534 with its jitdump one level down a jitdump directory")
	}
}
