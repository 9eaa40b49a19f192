// Package symtest holds test helpers for profd's symbol sources (FIFOs and JIT files): a
// collector of the batches a source delivers, and jitdump streams to feed them.
package symtest

import (
	"bytes"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// Event is one decoded record as a test sees it: its batch's target and source, and the
// event.
type Event struct {
	Pid    uint32
	Source codeobj.Source
	Event  jitmap.Event
}

// Collector gathers a source's events and errors. It is safe for concurrent use.
type Collector struct {
	mu     sync.Mutex
	events []Event
	errs   []error
}

// Handle is the source's handler.
func (c *Collector) Handle(b jitmap.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range b.Events {
		c.events = append(c.events, Event{Pid: b.Pid, Source: b.Source, Event: ev})
	}
	c.errs = append(c.errs, b.Errs...)
}

// Events returns the events so far.
func (c *Collector) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// Errors returns the errors so far.
func (c *Collector) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// WaitFor waits until ok holds for the events so far, or fails the test after 10 s.
func (c *Collector) WaitFor(t testing.TB, what string, ok func([]Event) bool) []Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := c.Events()
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; have %d events: %s", what, len(evs), Describe(evs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CountLoads counts the code loads among evs.
func CountLoads(evs []Event) int {
	n := 0
	for _, e := range evs {
		if _, ok := e.Event.(*jitmap.CodeLoad); ok {
			n++
		}
	}
	return n
}

// HasStreamEnd reports whether evs hold a jitdump CODE_CLOSE.
func HasStreamEnd(evs []Event) bool {
	for _, e := range evs {
		if _, ok := e.Event.(*jitmap.StreamEnd); ok {
			return true
		}
	}
	return false
}

// Describe lists evs in a line: "load:NAME move unload end ".
func Describe(evs []Event) string {
	var b bytes.Buffer
	for _, e := range evs {
		switch ev := e.Event.(type) {
		case *jitmap.CodeLoad:
			b.WriteString("load:" + ev.Object.Name + " ")
		case *jitmap.CodeMove:
			b.WriteString("move ")
		case *jitmap.CodeUnload:
			b.WriteString("unload ")
		case *jitmap.StreamEnd:
			b.WriteString("end ")
		case *jitmap.FlushRequest:
			b.WriteString("flush:" + strconv.FormatUint(ev.ID, 10) + " ")
		}
	}
	return b.String()
}

// JitdumpStream is a jitdump stream of pid loading one 2-byte function per name, at 0x1000,
// 0x2000, ...
func JitdumpStream(t testing.TB, pid uint32, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := jitdumptest.NewWriter(&b, jitmap.JitdumpHeader{Pid: pid, ElfMach: 62, TimestampNs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		err := w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: name, Addr: 0x1000 * uint64(i+1), Size: 2, Code: []byte{0x90, 0xc3}, LoadNs: int64(i + 2), CodeIndex: uint64(i + 1)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// ChurnStream is a jitdump stream of pid as a hostile (or very busy) JIT writes it: n code
// loads over slots addresses, each load after the first slots ending the code it replaces
// (with an unload record first, when unload): records that end code cost most.
func ChurnStream(t testing.TB, pid uint32, n, slots int, unload bool) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := jitdumptest.NewWriter(&b, jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: pid, TimestampNs: 1})
	if err != nil {
		t.Fatal(err)
	}
	code := []byte{0x90, 0x90, 0x90, 0xc3}
	for i := 0; i < n; i++ {
		addr := uint64(0x7e0000000000) + uint64(i%slots)*64
		if unload && i >= slots {
			if err := w.CodeUnload(&jitmap.CodeUnload{Pid: pid, Tid: pid, TimeNs: int64(2*i + 1), Addr: addr,
				CodeIndex: uint64(i - slots + 1)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "churn_" + strconv.Itoa(i), Addr: addr, Size: uint64(len(code)), Code: code,
			LoadNs: int64(2*i + 2), CodeIndex: uint64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// PerfMapLines is a perf map of n lines, every line at one of slots addresses.
func PerfMapLines(n, slots int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		b.WriteString(strconv.FormatUint(0x7d0000000000+uint64(i%slots)*64, 16))
		b.WriteString(" 40 map_churn_")
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}
