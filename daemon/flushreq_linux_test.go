package daemon

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/symsource/fifo"
)

// TestFlushRequests: a JIT asks for its profiles through its FIFO and reads the answer on
// its reply FIFO: the paths of the outputs it asked for, written after the records it sent
// before the request. A request naming another process is not answered; a burst of
// requests is answered by few flushes, in order; a JIT that never reads its replies costs
// one log line, and profd goes on.
func TestFlushRequests(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newDirs(t)
	target := testenv.Sleeper(t)
	pid := uint32(target.Process.Pid)
	r := startRun(t, Config{Pids: []uint32{pid}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	waitFor(t, "the target's FIFOs", 10*time.Second, func() bool {
		return fileExists(d.fifo + "/" + strconv.Itoa(int(pid)) + ".reply")
	})
	j := openJITEnd(t, d.fifo, pid)

	// A load, then a request for the capture only: the capture holds the load.
	if err := j.w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{Name: "asked_for",
		Addr: 0x7e0000001000, Size: 2, Code: []byte{0x90, 0xc3}, LoadNs: 1, CodeIndex: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: 1, Formats: fifo.FlushCapture}); err != nil {
		t.Fatal(err)
	}
	rep := j.next(t)
	capture := outputPath(d, "sleep", int(pid), FormatCapture)
	if rep.id != 1 || rep.status != 0 || len(rep.paths) != 1 || rep.paths[0] != capture {
		t.Fatalf("reply %+v, want request 1 answered with %s", rep, capture)
	}
	c := readCapture(t, capture)
	if len(c.Objects) != 1 || c.Objects[0].Object.Name != "asked_for" {
		t.Errorf("capture objects %v, want the load sent before the request", objectSummary(c))
	}
	if fileExists(outputPath(d, "sleep", int(pid), FormatPprof)) {
		t.Errorf("a pprof profile was written; the request asked for the capture only")
	}

	// Another process's request in this stream: dropped. Then one of its own: answered.
	if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid + 1, Tid: pid, ID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: 3}); err != nil {
		t.Fatal(err)
	}
	// The target runs no JIT code: there is no LLVM profile to write (llvm-profdata rejects
	// one of no function), and the answer says so.
	if rep := j.next(t); rep.id != 3 || rep.status != 0 || len(rep.paths) != 2 ||
		rep.paths[0] != outputPath(d, "sleep", int(pid), FormatPprof) {
		t.Fatalf("reply %+v, want request 3 answered with the pprof profile and the capture (request 2 named another process)", rep)
	}
	if fileExists(outputPath(d, "sleep", int(pid), FormatLLVMText)) {
		t.Errorf("an LLVM profile of no function was written")
	}
	if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: 4, Formats: fifo.FlushLLVMExtBinary}); err != nil {
		t.Fatal(err)
	}
	if rep := j.next(t); rep.id != 4 || rep.status != int32(syscall.ENODATA) || len(rep.paths) != 0 {
		t.Fatalf("reply %+v, want ENODATA: no LLVM profile yet", rep)
	}
	if n := strings.Count(r.logs.String(), "no JIT function has samples yet"); n != 1 {
		t.Errorf("%d log lines about the missing LLVM profiles, want 1", n)
	}

	// A burst: answered in order, each once, by few flushes.
	flushesBefore := strings.Count(r.logs.String(), "profd: flushed")
	const burst = 50
	for id := uint64(100); id < 100+burst; id++ {
		if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: id, Formats: fifo.FlushCapture}); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(100); id < 100+burst; id++ {
		if rep := j.next(t); rep.id != id || rep.status != 0 {
			t.Fatalf("reply %+v, want request %d answered", rep, id)
		}
	}
	if n := strings.Count(r.logs.String(), "profd: flushed") - flushesBefore; n >= burst/2 {
		t.Errorf("%d flushes for a burst of %d requests, want them coalesced", n, burst)
	}

	// A flood never read: the reply FIFO fills, one warning, profd goes on.
	for id := uint64(1000); id < 21000; id++ {
		if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: id, Formats: fifo.FlushLLVMText}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			l := r.logs.String()
			t.Logf("logs (end):\n%s", l[max(0, len(l)-3000):])
		}
	}()
	waitFor(t, "the warning about unread replies", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "cannot answer a flush request")
	})
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(r.logs.String(), "cannot answer a flush request"); n != 1 {
		t.Errorf("%d warnings about unread replies, want 1", n)
	}
	if !r.running() {
		t.Fatal("profd stopped")
	}
	r.stop(t)
	if _, err := os.Stat(d.fifo); !os.IsNotExist(err) {
		t.Errorf("FIFO directory left behind: %v", err)
	}
}
