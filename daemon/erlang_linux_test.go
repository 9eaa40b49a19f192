package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// erlangHot compiles testdata/hot.erl into a directory of its own.
func erlangHot(t *testing.T) string {
	t.Helper()
	testenv.Requires(t, testenv.Tool("erl"), testenv.Tool("erlc"))
	dir := t.TempDir()
	if out, err := exec.Command("erlc", "-o", dir, "testdata/hot.erl").CombinedOutput(); err != nil {
		t.Fatalf("erlc: %v\n%s", err, out)
	}
	return dir
}

// startErlang runs hot:main for secs seconds under Erlang's JIT with +JPperf mode and a
// profd run with call stacks on it.
func startErlang(t *testing.T, d dirs, mode string, secs int) (*child, *profdRun) {
	t.Helper()
	cmd := exec.Command("erl", "+JPperf", mode, "-noshell", "-pa", erlangHot(t), "-s", "hot", "main", fmt.Sprint(secs))
	cmd.Dir = t.TempDir() // an erl_crash.dump, if any
	beam := startCmd(t, cmd)
	t.Cleanup(beam.removeRuntimeFiles) // +JPperf dump writes /tmp/jit-PID.dump, and it stays
	r := startRun(t, Config{Pids: []uint32{uint32(beam.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out, Stacks: true})
	return beam, r
}

// TestErlangPerfTrue: with +JPperf true the BEAM names each function twice, in its jitdump
// (hot:spin/2) and its perf map ($hot:spin/2): profd gives each function one name, the
// jitdump's, and all its samples. Every Erlang process's stack starts at
// erts_beamasm:normal_exit/0, so its chains are complete, with that bottom frame named as
// perf names it.
func TestErlangPerfTrue(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newDirs(t)
	beam, r := startErlang(t, d, "true", 3)
	beam.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "beam.smp", beam.pid())
	funcs := jitTotals(c)
	var jit uint64
	for _, n := range funcs {
		jit += n
	}
	if funcs["$hot:spin/2"] != 0 || funcs["hot:spin/2"] < jit*8/10 {
		t.Errorf("hot:spin/2 %d and $hot:spin/2 %d of %d JIT samples: want all of spin/2's under the jitdump's name", funcs["hot:spin/2"], funcs["$hot:spin/2"], jit)
	}
	// The chains of samples in Erlang code (JIT code); the emulator's C code has no frame
	// pointers.
	var complete, cut uint64
	bottoms := map[string]uint64{}
	for _, st := range c.Stacks {
		if len(st.Frames) == 0 || !st.Frames[0].JIT() {
			continue
		}
		if st.Cut {
			cut += st.Count
		} else {
			complete += st.Count
		}
		if n := len(st.Frames); n > 0 {
			bottoms[frameName(c, st.Frames[n-1])] += st.Count
		}
	}
	if complete < 500 || complete < 95*(complete+cut)/100 {
		t.Errorf("samples in Erlang code: %d with complete chains, %d cut; want nearly all complete. Outermost frames: %v", complete, cut, bottoms)
	}
	for name := range bottoms {
		if strings.HasSuffix(name, "-CodeInfoPrologue") {
			t.Errorf("outermost frame %q: the return address at normal_exit's first byte was named by the code before it", name)
		}
	}
	if strings.Contains(r.logs.String(), "call chains stop before") {
		t.Errorf("the cut-chain warning was given:\n%s", r.logs.String())
	}
}

// TestErlangPerfMap: with +JPperf map only, functions have no line table; their LLVM
// profiles' head counts are never above their totals (both are repaired block counts), and
// profd's shares agree with perf's on the same run.
func TestErlangPerfMap(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perf"))
	d := newDirs(t)
	beam, r := startErlang(t, d, "map", 4)
	// perf record -p follows the threads there when it starts: the schedulers run the code.
	waitFor(t, "the BEAM's scheduler threads", 10*time.Second, func() bool {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", beam.pid()))
		for _, task := range tasks {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", beam.pid(), task.Name()))
			if strings.HasSuffix(strings.TrimSpace(string(comm)), "_scheduler") {
				return true
			}
		}
		return false
	})
	perf := startPerf(t, beam.pid(), 999)
	beam.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "beam.smp", beam.pid())
	compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, beam.pid(), false)))
	text := outputPath(d, "beam.smp", beam.pid(), FormatLLVMText)
	prof := readLLVMText(t, text)
	for _, fn := range prof.Functions {
		if fn.HeadSamples > fn.TotalSamples {
			t.Errorf("%s: head %d above total %d", fn.Name, fn.HeadSamples, fn.TotalSamples)
		}
	}
	if prof.Functions["$hot:spin/2"] == nil {
		t.Errorf("no profile of $hot:spin/2 in %s", filepath.Base(text))
	}
}
