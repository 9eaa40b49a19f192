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
	testenv.Requires(t, testenv.Root, testenv.Tool("gcc"), testenv.PerfEvent("cpu-clock"))
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	dir := t.TempDir()
	exe, mnt := filepath.Join(dir, "stallfs"), filepath.Join(dir, "mnt")
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", exe, "testdata/stallfs.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	server := exec.Command(exe, mnt)
	var unanswered testenv.SyncBuffer
	server.Stderr = &unanswered
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	// Killing the server ends every request it left, and whoever waits on one.
	t.Cleanup(func() {
		server.Process.Kill()
		server.Wait()
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "armed "))
	if err != nil || perr != nil {
		t.Skipf("stallfs did not mount its file system (%q, %v): %s", line, err, unanswered.String())
	}
	d := newDirs(t)
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}, Stacks: true, Duration: 2 * time.Second, StopTimeout: 2 * time.Second})
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		server.Process.Kill() // lets profd's stuck thread go, so that the test ends
		<-r.done
		t.Fatalf("profd did not stop within a minute of a 2 s run\nstderr of the server:\n%s\nlogs:\n%s", unanswered.String(), r.logs.String())
	}
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	if u := unanswered.String(); u != "" {
		t.Errorf("profd made requests of the FUSE server:\n%s", u)
	}
	c := readCapture(t, outputPath(d, "stallfs", pid, FormatCapture))
	var onFUSE uint64
	for _, m := range c.Native {
		if strings.HasPrefix(m.File, mnt) {
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
