package daemon

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// TestStalledFUSEServer: a target runs code mapped from a file of a FUSE file system whose
// server answers nothing more (testdata/stallfs.c). A request to it would hold profd's
// thread for good, past SIGKILL; profd sends none: it stops on time, writes the target's
// profiles with its samples named by the file, and warns once.
func TestStalledFUSEServer(t *testing.T) {
	s := startStallfs(t)
	d := newDirs(t)
	r := startRun(t, Config{Pids: []uint32{uint32(s.pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}, Stacks: true, Duration: 2 * time.Second, StopTimeout: 2 * time.Second})
	s.waitRun(t, r)
	if u := s.unanswered.String(); u != "" {
		t.Errorf("profd made requests of the FUSE server:\n%s", u)
	}
	c := readCapture(t, outputPath(d, "stallfs", s.pid, FormatCapture))
	var onFUSE uint64
	for _, m := range c.Native {
		if strings.HasPrefix(m.File, s.mnt) {
			onFUSE += m.TotalSamples()
		}
	}
	if onFUSE < 100 {
		t.Errorf("%d samples named by the file on FUSE, want the loop's ~2 s of CPU\nlogs:\n%s", onFUSE, r.logs.String())
	}
	if n := strings.Count(r.logs.String(), "native code on a FUSE file system"); n != 1 {
		t.Errorf("%d warnings about the file on FUSE, want 1\nlogs:\n%s", n, r.logs.String())
	}
}

// TestStalledFUSEMemory: the target's perf map names, as a JIT function, a page of its
// memory that the stalled FUSE server's file backs and that was never read. Reading that
// function's code from the process waits on the server: profd leaves the read after
// procmem.ReadTimeout, warns once, and stops on time.
func TestStalledFUSEMemory(t *testing.T) {
	s := startStallfs(t, "perfmap")
	t.Cleanup(func() { os.Remove("/tmp/perf-" + strconv.Itoa(s.pid) + ".map") })
	d := newDirs(t)
	r := startRun(t, Config{Pids: []uint32{uint32(s.pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}, Duration: 6 * time.Second, StopTimeout: 2 * time.Second})
	s.waitRun(t, r)
	if n := strings.Count(r.logs.String(), "reading a JIT's code from its memory did not end in time"); n != 1 {
		t.Errorf("%d warnings about the read left waiting, want 1\nlogs:\n%s", n, r.logs.String())
	}
	if !fileExists(outputPath(d, "stallfs", s.pid, FormatCapture)) {
		t.Errorf("no capture written\nlogs:\n%s", r.logs.String())
	}
}

// stallfs is a running testdata/stallfs.c: its pid, mount point, and the requests it left
// unanswered.
type stallfs struct {
	pid        int
	mnt        string
	server     *exec.Cmd
	unanswered testenv.SyncBuffer
}

// startStallfs builds and starts stallfs with args after its mount point, and returns once
// it left answering; the test's end kills it, which ends every request it left and lets
// whoever waits on one go.
func startStallfs(t *testing.T, args ...string) *stallfs {
	testenv.Requires(t, testenv.Root, testenv.Tool("gcc"), testenv.PerfEvent("cpu-clock"))
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "stallfs")
	s := &stallfs{mnt: filepath.Join(dir, "mnt")}
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", exe, "testdata/stallfs.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if err := os.Mkdir(s.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	s.server = exec.Command(exe, append([]string{s.mnt}, args...)...)
	s.server.Stderr = &s.unanswered
	stdout, err := s.server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.server.Process.Kill()
		s.server.Wait()
		unix.Unmount(s.mnt, unix.MNT_DETACH)
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "armed "))
	if err != nil || perr != nil {
		t.Skipf("stallfs did not mount its file system (%q, %v): %s", line, err, s.unanswered.String())
	}
	s.pid = pid
	return s
}

// waitRun waits for r, which runs for a few seconds, to end, and fails the test if it does
// not within a minute (after killing the server, so that the test ends).
func (s *stallfs) waitRun(t *testing.T, r *profdRun) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		s.server.Process.Kill()
		<-r.done
		t.Fatalf("profd did not stop within a minute of a run of seconds\nstderr of the server:\n%s\nlogs:\n%s", s.unanswered.String(), r.logs.String())
	}
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
}
