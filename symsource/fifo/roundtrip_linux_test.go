package fifo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/jitmap"
)

// TestHeaderLibraryRoundTrip runs a C program that uses jit/profd_jit.h to send every record
// type through a real FIFO, and checks that jitmap decodes exactly what it sent.
func TestHeaderLibraryRoundTrip(t *testing.T) {
	writer := cProgram(t, "writer")
	s, c, logs := startServer(t, Config{})

	before := monotonicNow()
	cmd := exec.Command(writer, s.Dir(), "roundtrip")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	if err := s.AddTarget(pid, testOwner); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer: %v\n%s", err, stdout.String())
	}
	after := monotonicNow()
	evs := c.WaitFor(t, "the stream's CODE_CLOSE", symtest.HasStreamEnd)

	var beta uint64
	if _, err := fmt.Sscanf(lineStarting(t, stdout.String(), "beta "), "beta %v", &beta); err != nil || beta == 0 {
		t.Fatalf("beta's address: %v (%#x)", err, beta)
	}
	// Header, CODE_DEBUG_INFO, 4 CODE_LOADs, CODE_MOVE, CODE_UNLOAD, the flush request,
	// CODE_CLOSE.
	if got := lineStarting(t, stdout.String(), "records "); got != "records 10 dropped 0 rc 0" {
		t.Fatalf("writer reports %q, want 10 records sent, none dropped", got)
	}

	pattern := func(n int, f func(i int) byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = f(i)
		}
		return b
	}
	want := []jitmap.Event{
		&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "alpha", Addr: 0x10000, Size: 32, CodeIndex: 1, Source: codeobj.SourceFIFO,
			Code: pattern(32, func(i int) byte { return byte(i * 7) }),
			Lines: []codeobj.LineEntry{
				{Addr: 0x10000, File: "alpha.c", Line: 10},
				{Addr: 0x10008, File: "alpha.c", Line: 11, Discriminator: 2},
				{Addr: 0x10010, File: "inc/alpha.h", Line: 12},
			}}},
		&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "beta", Addr: beta, Size: 48, CodeIndex: 2, Source: codeobj.SourceFIFO,
			Code: pattern(48, func(i int) byte { return byte(0xB0 + i) })}},
		&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "big", Addr: 0x200000, Size: 300000, CodeIndex: 3, Source: codeobj.SourceFIFO,
			Code: pattern(300000, func(i int) byte { return byte(i*31 + 7) })}},
		&jitmap.CodeMove{Pid: pid, Tid: pid, CodeIndex: 1, OldAddr: 0x10000, NewAddr: 0x30000, Size: 32},
		&jitmap.CodeUnload{Pid: pid, Tid: pid, CodeIndex: 2, Addr: beta},
		&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "λ operator() const", Addr: 0x40000, Size: 1, CodeIndex: 4, Source: codeobj.SourceFIFO,
			Code: []byte{0xc3}}},
		&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: 1},
		&jitmap.StreamEnd{},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events (%s), want %d", len(evs), symtest.Describe(evs), len(want))
	}
	last := before
	for i, e := range evs {
		if e.Pid != pid || e.Source != codeobj.SourceFIFO {
			t.Errorf("event %d tagged pid %d source %v, want %d fifo", i, e.Pid, e.Source, pid)
		}
		ts := takeTime(e.Event)
		if ts < last || ts > after {
			t.Errorf("event %d: time %d outside [%d, %d] or out of order", i, ts, last, after)
		}
		last = ts
		if !reflect.DeepEqual(e.Event, want[i]) {
			t.Errorf("event %d:\n got %s\nwant %s", i, short(e.Event), short(want[i]))
		}
	}
	st := s.Stats()
	if st.Records != uint64(len(want)) || st.BadRecords != 0 || st.RejectedPid != 0 {
		t.Errorf("stats %+v; want %d records, nothing bad\nlogs:\n%s", st, len(want), logs)
	}
}

// takeTime returns the event's timestamp and zeroes it, so the rest can be compared exactly.
func takeTime(ev jitmap.Event) int64 {
	var ts int64
	switch ev := ev.(type) {
	case *jitmap.CodeLoad:
		ts, ev.Object.LoadNs = ev.Object.LoadNs, 0
	case *jitmap.CodeMove:
		ts, ev.TimeNs = ev.TimeNs, 0
	case *jitmap.CodeUnload:
		ts, ev.TimeNs = ev.TimeNs, 0
	case *jitmap.StreamEnd:
		ts, ev.TimeNs = ev.TimeNs, 0
	case *jitmap.FlushRequest:
		ts, ev.TimeNs = ev.TimeNs, 0
	}
	return ts
}

func short(ev jitmap.Event) string {
	if l, ok := ev.(*jitmap.CodeLoad); ok {
		o := l.Object
		code := o.Code
		if len(code) > 8 {
			code = code[:8]
		}
		return fmt.Sprintf("load pid=%d tid=%d %q %#x+%d idx=%d src=%v lines=%+v code[:8]=%x len=%d",
			l.Pid, l.Tid, o.Name, o.Addr, o.Size, o.CodeIndex, o.Source, o.Lines, code, len(o.Code))
	}
	return fmt.Sprintf("%T %+v", ev, ev)
}

func lineStarting(t *testing.T, out, prefix string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return sc.Text()
		}
	}
	t.Fatalf("no line %q... in the output:\n%s", prefix, out)
	return ""
}
