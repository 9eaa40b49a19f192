package fifo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

func TestHeaderLibraryWithoutDaemon(t *testing.T) {
	writer := cProgram(t, "writer")
	out, err := exec.Command(writer, privateDir(t), "absent").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "unprofiled ok") {
		t.Fatalf("writer without profd: %v\n%s", err, out)
	}
}

// TestHeaderLibrarySurvivesDaemonGoing: profd removes the FIFO's reader while the JIT writes;
// the JIT must see "no daemon" and go on, not die of SIGPIPE.
func TestHeaderLibrarySurvivesDaemonGoing(t *testing.T) {
	writer := cProgram(t, "writer")
	s, c, _ := startServer(t, Config{})
	cmd := exec.Command(writer, s.Dir(), "gone")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	if err := s.AddTarget(pid, testOwner); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	// The header arrives once the writer is connected; then profd lets go of the FIFO.
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Bytes < 40 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.RemoveTarget(pid)
	stdin.Write([]byte("go\n"))
	stdin.Close()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("the JIT died of %v when profd went away\n%s", exit.Sys().(syscall.WaitStatus).Signal(), out.String())
	}
	if err != nil {
		t.Fatalf("writer: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "gone after 1 loads rc 1 fd -1") {
		t.Errorf("the first write after profd went should report no daemon:\n%s", out.String())
	}
	if n := len(c.Events()); n != 0 {
		t.Errorf("%d events from a writer whose loads all came after profd left", n)
	}
}

// TestReaderSurvivesExec: the JIT exec()s; the new image reopens the FIFO and starts a new
// jitdump stream, which is decoded as well.
func TestReaderSurvivesExec(t *testing.T) {
	writer := cProgram(t, "writer")
	s, c, logs := startServer(t, Config{})
	cmd := exec.Command(writer, s.Dir(), "exec")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTarget(uint32(cmd.Process.Pid), testOwner); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer: %v\n%s", err, out.String())
	}
	evs := c.WaitFor(t, "loads from before and after exec", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) >= 2 })
	names := symtest.Describe(evs)
	if names != "load:before_exec load:after_exec end " && names != "load:before_exec load:after_exec " {
		t.Errorf("events %q, want before_exec then after_exec", names)
	}
	if st := s.Stats(); st.BadRecords != 0 {
		t.Errorf("stats %+v\n%s", st, logs)
	}
}

// TestReaderAcrossWriterSessions: one writer closes and another opens (a JIT restarting its
// writer, switching format), and a writer reopening before profd saw the first close (the
// new header then arrives mid-stream): every session's records come through.
func TestReaderAcrossWriterSessions(t *testing.T) {
	s, c, logs := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	path := s.FIFOPath(pid)

	w := openWriter(t, path)
	w.Write(symtest.JitdumpStream(t, pid, "one", "two"))
	w.Close()
	c.WaitFor(t, "the first session", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 2 })

	w = openWriter(t, path)
	w.Write([]byte("3000 10 three\n0x4000 0x10 four\n"))
	w.Close()
	c.WaitFor(t, "the perf-map session", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 4 })

	// Back-to-back sessions with no EOF between them: the second header lands mid-stream.
	w1 := openWriter(t, path)
	w2 := openWriter(t, path)
	w1.Write(symtest.JitdumpStream(t, pid, "five"))
	w1.Close()
	w2.Write(symtest.JitdumpStream(t, pid, "six", "seven"))
	w2.Close()
	evs := c.WaitFor(t, "both back-to-back sessions", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 7 })
	if got := symtest.Describe(evs); got != "load:one load:two load:three load:four load:five load:six load:seven " {
		t.Errorf("events %q", got)
	}
	// Whether the reader saw each end of file depends on scheduling; the stream found a new
	// session at least where no end of file could come.
	st := s.Stats()
	if st.Restarts < 1 || st.BadRecords != 0 {
		t.Errorf("stats %+v: want a restart at the mid-stream header and no bad record\n%s", st, logs)
	}
}

// TestReaderStoppedAcrossSessions: writer sessions of every kind follow each other while
// the reader sees no end of file between them (another writer keeps the FIFO open, as when
// profd is not scheduled between a JIT's sessions): each session's complete records arrive.
func TestReaderStoppedAcrossSessions(t *testing.T) {
	s, c, logs := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	path := s.FIFOPath(pid)
	keeper := openWriter(t, path)
	cut := symtest.JitdumpStream(t, pid, "cut_one", "cut_two")
	sessions := [][]byte{
		symtest.JitdumpStream(t, pid, "one", "two"),
		[]byte("3000 10 three\n0x4000 0x10 four\n"),
		symtest.JitdumpStream(t, pid, "five"),
		[]byte("6000 10 six\n7000 10 sev"), // a writer that died mid-line
		symtest.JitdumpStream(t, pid, "eight"),
		cut[:len(cut)-10], // one that died mid-record
		symtest.JitdumpStream(t, pid, "nine"),
		bytes.Repeat([]byte{0xfe, 0x01}, 100), // garbage
		symtest.JitdumpStream(t, pid, "ten"),
	}
	for _, b := range sessions {
		w := openWriter(t, path)
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	keeper.Close()
	want := "load:one load:two load:three load:four load:five load:six load:eight load:cut_one load:nine load:ten "
	evs := c.WaitFor(t, "every session", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) >= 10 })
	if got := symtest.Describe(evs); got != want {
		t.Errorf("events %q\nwant   %q\n%s", got, want, logs)
	}
	// A new decoder at each session but the one after the garbage, which was looked for
	// (its 200 bytes skipped); bad: the cut line, the cut record, the garbage's first byte.
	if st := s.Stats(); st.Restarts != 6 || st.Skipped != 200 || st.BadRecords != 3 {
		t.Errorf("stats %+v: want 6 restarts, 200 bytes skipped, 3 bad records", st)
	}
}

// TestReaderStopsOnCancel: a writer keeps the FIFO open (no EOF ever comes); cancelling the
// context still ends the reader, and what was written before is delivered.
func TestReaderStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &symtest.Collector{}
	s, err := Start(ctx, Config{Dir: privateDir(t), Handler: c.Handle})
	if err != nil {
		t.Fatal(err)
	}
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s.FIFOPath(pid))
	defer w.Close()
	w.Write([]byte("1000 10 kept\n"))
	c.WaitFor(t, "the first line", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	w.Write([]byte("2000 10 last_line_before_cancel\n"))
	cancel()
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after cancel while a writer held the FIFO open")
	}
	if got := symtest.Describe(c.Events()); got != "load:kept load:last_line_before_cancel " {
		t.Errorf("events %q: what was written before cancel must be delivered", got)
	}
	if _, err := os.Lstat(s.FIFOPath(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("FIFO still there after Close: %v", err)
	}
	if _, err := os.Lstat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory still there after Close: %v", err)
	}
}

// TestReaderRejectsOtherPids: a stream in pid A's FIFO describing pid B is refused and counted.
func TestReaderRejectsOtherPids(t *testing.T) {
	s, c, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	stream := symtest.JitdumpStream(t, 1, "not_mine", "nor_this")
	var b bytes.Buffer
	w, _ := jitdumptest.NewWriter(&b, jitmap.JitdumpHeader{Pid: pid})
	w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{Name: "mine", Addr: 0x9000, Size: 1, Code: []byte{0xc3}}})
	stream = append(stream, b.Bytes()[40:]...) // the same stream goes on with a record of its own pid
	fw := openWriter(t, s.FIFOPath(pid))
	fw.Write(stream)
	fw.Close()
	evs := c.WaitFor(t, "the load of the FIFO's own pid", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	if got := symtest.Describe(evs); got != "load:mine " {
		t.Errorf("events %q, want only load:mine", got)
	}
	if st := s.Stats(); st.RejectedPid != 2 || st.Records != 1 {
		t.Errorf("stats %+v, want 2 rejected and 1 record", st)
	}
}

// TestReaderReportsBadRecordsWithOffset: bad lines are reported with their byte offsets and
// skipped; the good ones around them are delivered.
func TestReaderReportsBadRecordsWithOffset(t *testing.T) {
	s, c, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	text := "1000 10 good_one\nthis is not a symbol\n2000 20 good_two\n"
	w := openWriter(t, s.FIFOPath(pid))
	w.Write([]byte(text))
	w.Close()
	c.WaitFor(t, "both good lines", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 2 })
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().BadRecords == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := s.Stats(); st.BadRecords != 1 || st.Records != 2 || st.Bytes != uint64(len(text)) {
		t.Errorf("stats %+v, want 1 bad record, 2 records, %d bytes", st, len(text))
	}
	errs := c.Errors()
	var de *jitmap.DecodeError
	if len(errs) != 1 || !errors.As(errs[0], &de) || de.Offset != int64(strings.Index(text, "this")) {
		t.Errorf("errors %v: want the bad line's, at offset %d", errs, strings.Index(text, "this"))
	}
}

// TestTestJIT runs jit/testjit against the Server: its loads, address reuse and move arrive
// in order, with code bytes that are real x86-64 counting loops.
func TestTestJIT(t *testing.T) {
	testjit := cProgram(t, "testjit")
	s, c, logs := startServer(t, Config{})
	cmd := exec.Command(testjit, "-d", s.Dir(), "-m", "20", "-w", "5000")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTarget(uint32(cmd.Process.Pid), testOwner); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("testjit: %v\n%s", err, out.String())
	}
	evs := c.WaitFor(t, "testjit's stream end", symtest.HasStreamEnd)
	var seq []string
	var small, large *codeobj.Object
	for _, e := range evs {
		switch ev := e.Event.(type) {
		case *jitmap.CodeLoad:
			seq = append(seq, "load "+ev.Object.Name)
			switch ev.Object.Name {
			case "count_small":
				small = &ev.Object
			case "count_large":
				large = &ev.Object
			}
			if ev.Object.Code[len(ev.Object.Code)-1] != 0xc3 || len(ev.Object.Lines) != 3 {
				t.Errorf("%s: code %x lines %v: want a ret-terminated function with 3 lines", ev.Object.Name, ev.Object.Code, ev.Object.Lines)
			}
		case *jitmap.CodeUnload:
			seq = append(seq, fmt.Sprintf("unload %d", ev.CodeIndex))
		case *jitmap.CodeMove:
			seq = append(seq, fmt.Sprintf("move %d", ev.CodeIndex))
		}
	}
	want := "load count_small,load count_medium,unload 1,load count_large,move 2,unload 3,unload 2"
	if got := strings.Join(seq, ","); got != want {
		t.Fatalf("testjit events %q, want %q\n%s\n%s", got, want, out.String(), logs)
	}
	if small.Addr != large.Addr || small.LoadNs >= large.LoadNs || bytes.Equal(small.Code, large.Code) {
		t.Fatalf("count_large should reuse count_small's address later with other code: %#x@%d vs %#x@%d",
			small.Addr, small.LoadNs, large.Addr, large.LoadNs)
	}

	// Into jitmap: the same loop address names count_small before the reuse and count_large
	// after it.
	m := jitmap.NewMap(jitmap.MapOptions{})
	for _, e := range evs {
		if err := m.Apply(e.Event); err != nil {
			t.Fatalf("apply %s: %v", short(e.Event), err)
		}
	}
	pid := evs[0].Pid
	loop := small.Addr + 7
	if o, ok := m.Lookup(pid, loop, small.LoadNs+1); !ok || o.Name != "count_small" {
		t.Errorf("lookup %#x just after count_small's load: %v %v", loop, o, ok)
	}
	if o, ok := m.Lookup(pid, loop, large.LoadNs+1); !ok || o.Name != "count_large" {
		t.Errorf("lookup %#x just after count_large's load: %v %v", loop, o, ok)
	}
}

// TestReaderSleepsBetweenWriters: after a writer closes, the reader waits for the next one
// instead of spinning on end-of-file: the process uses next to no CPU meanwhile (a reader
// woken again and again by the hang-up would take most of a core).
func TestReaderSleepsBetweenWriters(t *testing.T) {
	s, c, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s.FIFOPath(pid))
	w.Write([]byte("1000 10 only\n"))
	w.Close()
	c.WaitFor(t, "the line", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	for s.Stats().Sessions < 2 { // the end of the session was seen
		time.Sleep(time.Millisecond)
	}
	const idle = 200 * time.Millisecond
	before := processCPU(t)
	time.Sleep(idle)
	if used := processCPU(t) - before; used > idle/5 {
		t.Errorf("the process used %v of CPU in %v with no writer", used, idle)
	}
}

// TestIdleFIFOsHoldNoThreads: readers wait on the runtime's poller, so hundreds of idle
// FIFOs add next to no threads (a reader blocked in poll(2) would hold one each, and a user
// starting processes could take profd past the runtime's limit of 10 000) and no read
// buffers; records written to every FIFO, in two writer sessions, still arrive.
func TestIdleFIFOsHoldNoThreads(t *testing.T) {
	const targets = 300
	s, c, logs := startServer(t, Config{})
	threadsBefore, heapBefore := processThreads(t), heapAlloc()
	for i := range targets {
		if err := s.AddTarget(uint32(100000+i), testOwner); err != nil {
			t.Fatal(err)
		}
	}
	for session := 1; session <= 2; session++ {
		for i := range targets {
			w := openWriter(t, s.FIFOPath(uint32(100000+i)))
			fmt.Fprintf(w, "%x 10 f%d_%d\n", 0x1000+i, i, session)
			w.Close()
		}
		c.WaitFor(t, fmt.Sprintf("session %d's line from every FIFO", session), func(evs []symtest.Event) bool {
			return symtest.CountLoads(evs) == session*targets
		})
	}
	time.Sleep(100 * time.Millisecond) // every reader back to waiting
	threads, heap := processThreads(t)-threadsBefore, int64(heapAlloc())-int64(heapBefore)
	t.Logf("%d idle FIFOs: %d more threads, %d KiB more heap", targets, threads, heap>>10)
	if threads >= targets/10 {
		t.Errorf("%d idle FIFOs took %d more threads", targets, threads)
	}
	if heap >= targets*DefaultReadBufferBytes/4 {
		t.Errorf("%d idle FIFOs hold %d KiB more heap: read buffers kept while idle?", targets, heap>>10)
	}
	perPid := map[uint32]int{}
	for _, e := range c.Events() {
		perPid[e.Pid]++
	}
	for i := range targets {
		if n := perPid[uint32(100000+i)]; n != 2 {
			t.Fatalf("pid %d: %d loads, want 2\n%s", 100000+i, n, logs)
		}
	}
	if st := s.Stats(); st.BadRecords != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestStopBeforeReopen: a stop that woke the read end's Waiter just before a reopen replaced
// it (a new descriptor, so a new Waiter) still ends the next wait.
func TestStopBeforeReopen(t *testing.T) {
	d, err := OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.createPipe(81, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	w := openWriter(t, p.path)
	w.Write([]byte("x"))
	w.Close()
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	p.stop()
	buf := make([]byte, 16)
	if n, eof, err := p.read(buf); n != 1 || eof || err != nil {
		t.Fatalf("read %d, eof %v, %v: want the byte written", n, eof, err)
	}
	if n, eof, err := p.read(buf); n != 0 || !eof || err != nil {
		t.Fatalf("read %d, eof %v, %v: want the end of the session", n, eof, err)
	}
	done := make(chan error, 1)
	go func() { done <- p.wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, errWoken) {
			t.Errorf("wait after a stop and a reopen: %v, want errWoken", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop was lost with the Waiter the reopen replaced")
	}
}

// processThreads is the test process's thread count (Threads: in /proc/self/status).
func processThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

// heapAlloc is the heap in use after a collection; two let go of what sync.Pools hold.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// processCPU is the user and system CPU time the test process has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestHeaderLibraryDropsWholeRecordsWhenPipeFull: nobody reads the FIFO; the JIT's writes
// wait at most timeout_ms, then drop whole records, and what did go out decodes cleanly.
func TestHeaderLibraryDropsWholeRecordsWhenPipeFull(t *testing.T) {
	writer := cProgram(t, "writer")
	d, err := OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cmd := exec.Command(writer, d.Path(), "flood")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The FIFO (and a read end nobody reads yet) must exist before the writer's pid is known:
	// the writer retries its open, so make it right after the start.
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := d.createPipe(uint32(cmd.Process.Pid), os.Geteuid(), os.Getegid())
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	defer p.close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer: %v\n%s", err, out.String())
	}
	var records, dropped, broken, open, elapsed int
	if _, err := fmt.Sscanf(out.String(), "records %d dropped %d broken %d fd_open %d elapsed_ms %d",
		&records, &dropped, &broken, &open, &elapsed); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if dropped == 0 || broken != 0 || open != 1 || records+dropped != 25 {
		t.Fatalf("%s: want some of the 24 loads dropped whole, none cut off, the FIFO still open", out.String())
	}
	// What went out is a clean jitdump stream.
	var got []jitmap.Event
	st := jitmap.NewStream(uint32(cmd.Process.Pid), codeobj.SourceFIFO, "flood", jitmap.DecoderOptions{})
	buf := make([]byte, 1<<16)
	for {
		n, err := syscall.Read(p.fd, buf)
		if n <= 0 || err != nil {
			break
		}
		got = append(got, st.Write(buf[:n]).Events...)
	}
	got = append(got, st.Finish().Events...)
	if stats := st.Counts(); stats.BadRecords != 0 || len(got) != records-1 {
		t.Errorf("decoded %d loads, %d bad records; the writer sent %d loads", len(got), stats.BadRecords, records-1)
	}
}

func TestAddTargetAfterCancelIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, Config{Dir: privateDir(t), Handler: func(jitmap.Batch) {}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.AddTarget(uint32(os.Getpid()), testOwner); !errors.Is(err, ErrClosed) {
		t.Errorf("AddTarget after cancel: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPerfMapCodeReadFromOtherProcess: a JIT process sends a perf-map line for code in its
// own memory; the load, enriched as the daemon does, has the bytes read from that process
// while it runs.
func TestPerfMapCodeReadFromOtherProcess(t *testing.T) {
	writer := cProgram(t, "writer")
	s, c, logs := startServer(t, Config{})
	cmd := exec.Command(writer, s.Dir(), "perfmap")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	pid := uint32(cmd.Process.Pid)
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	evs := c.WaitFor(t, "the perf-map load", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	load := evs[0].Event.(*jitmap.CodeLoad)
	enrich.New(enrich.Options{ReadCode: true}).Load(load)
	o := load.Object
	want := make([]byte, 48)
	for i := range want {
		want[i] = byte(0x40 ^ i)
	}
	if o.Name != "perf_map_function" || !bytes.Equal(o.Code, want) || evs[0].Pid != pid {
		t.Errorf("load %q of pid %d with code %x, want %x from pid %d\n%s\n%s", o.Name, evs[0].Pid, o.Code, want, pid, out.String(), logs)
	}
}

// TestCloseByDeadline: a FIFO full of records and a slow consumer do not hold Close past
// its deadline; what was left in the FIFO is counted and logged.
func TestCloseByDeadline(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	s, err := Start(context.Background(), Config{Dir: privateDir(t),
		Handler: func(jitmap.Batch) { time.Sleep(50 * time.Millisecond) }, // a busy symbol stage
		Logger:  slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s.FIFOPath(pid))
	var text bytes.Buffer
	for text.Len() < 900<<10 {
		fmt.Fprintf(&text, "%x 10 f%d\n", 0x1000+text.Len(), text.Len())
	}
	if _, err := w.Write(text.Bytes()); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	if err := s.CloseBy(start.Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// Reading it all takes 14 reads of 50 ms; the deadline stops that after about 4 (how
	// many depends on scheduling: what was left is the test).
	if took > 5*time.Second {
		t.Errorf("Close took %v with a 200 ms deadline", took)
	}
	st := s.Stats()
	if st.Unread == 0 || st.Unread+st.Bytes != uint64(text.Len()) {
		t.Errorf("stats %+v: want the %d bytes written split between read and unread", st, text.Len())
	}
	if !strings.Contains(logs.String(), "the stop deadline passed") {
		t.Errorf("no log line says the deadline passed:\n%s", logs)
	}
}

// TestCloseByDeadlineCutsNoRecord: when the stop deadline cuts a flood of jitdump records,
// the partial record at the end of what was read is counted unread, not reported bad.
func TestCloseByDeadlineCutsNoRecord(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	s, err := Start(context.Background(), Config{Dir: privateDir(t),
		Handler: func(b jitmap.Batch) {
			mu.Lock()
			errs = append(errs, b.Errs...)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // a busy symbol stage
		},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	jw, _ := jitdumptest.NewWriter(&stream, jitmap.JitdumpHeader{Pid: pid})
	for i := 0; stream.Len() < 900<<10; i++ {
		// Names of varying length: records end anywhere in a read.
		name := fmt.Sprintf("f%d_%s", i, strings.Repeat("x", i%37))
		jw.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{Name: name, Addr: 0x10000 + uint64(i)*16, Size: 1, Code: []byte{0xc3}, CodeIndex: uint64(i)}})
	}
	w := openWriter(t, s.FIFOPath(pid))
	if _, err := w.Write(stream.Bytes()); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := s.CloseBy(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 0 || st.BadRecords != 0 {
		t.Errorf("errors %v, %d bad records: a record the stop cut is no bad record", errs, st.BadRecords)
	}
	if st.Unread == 0 || st.Unread+st.Bytes != uint64(stream.Len()) {
		t.Errorf("stats %+v: want the %d bytes written split between read and unread", st, stream.Len())
	}
}
