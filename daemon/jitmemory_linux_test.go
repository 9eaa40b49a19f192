package daemon

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestSharedAnonymousJITMemory: JIT code in shared anonymous memory (MAP_SHARED |
// MAP_ANONYMOUS; /proc shows "/dev/zero (deleted)") is JIT memory, named by the JIT's perf
// map like code in private anonymous memory, not filed under [outside JIT] /dev/zero.
func TestSharedAnonymousJITMemory(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"))
	exe := filepath.Join(t.TempDir(), "sharedjit")
	if out, err := exec.Command("cc", "-O1", "-o", exe, "testdata/sharedjit.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	d := newDirs(t)
	w := startCmd(t, exec.Command(exe, "3"))
	pid := w.pid()
	t.Cleanup(w.removeRuntimeFiles)
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatPprof, FormatCapture}, Stacks: true})
	w.wait(t, 90*time.Second) // 3 s of CPU: longer on a busy machine
	r.wait(t, 30*time.Second)
	c := readCapture(t, outputPath(d, "sharedjit", pid, FormatCapture))
	named := jitTotals(c)["shared_jit_loop"]
	var outside uint64
	for _, u := range c.Unmapped {
		if strings.Contains(u.Mapping, "/dev/zero") {
			outside += u.Count
		}
	}
	for _, m := range c.Native {
		if strings.Contains(m.File, "/dev/zero") {
			outside += m.TotalSamples()
		}
	}
	if named < 500 || outside > named/10 {
		t.Errorf("shared_jit_loop: %d samples named, %d filed under /dev/zero; want the loop's ~3 s of CPU named\nlogs:\n%s", named, outside, r.logs.String())
	}
}
