package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestResetOnFlushOneSet: with --reset-on-flush, a flush of an interval in which the JIT
// ran no code writes no LLVM profile, and the LLVM profiles of the interval before are
// removed, so that the files beside each other, and the flush reply, are one flush's.
func TestResetOnFlushOneSet(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	// -a: a second request after the last round, no JIT code having run since the first.
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "100", "-r", "1", "-w", "10000", "-F", "-a")
	pid := jit.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out, ResetOnFlush: true})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	path := func(f Format) string { return outputPath(d, "testjit", pid, f) }
	all := []string{path(FormatLLVMText), path(FormatLLVMExtBinary), path(FormatPprof), path(FormatCapture)}
	idle := []string{path(FormatPprof), path(FormatCapture)}
	var replies []string
	for _, line := range strings.Split(jit.out.String(), "\n") {
		if strings.HasPrefix(line, "flushed ") {
			replies = append(replies, line)
		}
	}
	want := []string{"flushed rc=0 status=0 paths=" + strings.Join(all, ","), "flushed rc=0 status=0 paths=" + strings.Join(idle, ",")}
	if !slices.Equal(replies, want) {
		t.Fatalf("replies %q, want %q (the interval with JIT code, then the idle one)\n%s", replies, want, jit.out.String())
	}
	// The final flush (after the JIT's exit, no JIT code either) leaves the same set.
	entries, err := os.ReadDir(d.out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Name() != ".profd.lock" {
			got = append(got, filepath.Join(d.out, e.Name()))
		}
	}
	slices.Sort(got)
	wantFiles := slices.Sorted(slices.Values(idle))
	if !slices.Equal(got, wantFiles) {
		t.Errorf("--out holds %q, want the last flush's files only, %q", got, wantFiles)
	}
}
