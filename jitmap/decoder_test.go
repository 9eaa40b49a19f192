package jitmap_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// decodeChunks feeds stream to a fresh decoder in pieces cut at the given positions and
// returns everything it produced, Finish included.
func decodeChunks(t testing.TB, pid uint32, src codeobj.Source, opts jitmap.DecoderOptions, stream []byte, cuts ...int) ([]jitmap.Event, []error) {
	t.Helper()
	d := jitmap.NewDecoder(pid, src, opts)
	var evs []jitmap.Event
	var errs []error
	prev := 0
	for _, c := range append(cuts, len(stream)) {
		chunk := append([]byte(nil), stream[prev:c]...)
		e, er := d.Write(chunk)
		for i := range chunk {
			chunk[i] ^= 0xA5 // Write must not have kept p
		}
		evs, errs = append(evs, e...), append(errs, er...)
		prev = c
	}
	e, er := d.Finish()
	return append(evs, e...), append(errs, er...)
}

func sampleEvents(pid uint32) []jitmap.Event {
	return []jitmap.Event{
		&jitmap.CodeLoad{Pid: pid, Tid: pid + 1, Object: codeobj.Object{
			Name: "sq", Addr: 0x7f0000001000, Size: 6, Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
			Lines: []codeobj.LineEntry{
				{Addr: 0x7f0000001000, File: "/src/a.c", Line: 1},
				{Addr: 0x7f0000001004, File: "/src/a.c", Line: 2, Discriminator: 3},
				{Addr: 0x7f0000001005, File: "/src/b.h", Line: 40},
			},
			LoadNs: 1000, CodeIndex: 1, Source: codeobj.SourceFIFO,
		}, FrameInfo: []byte("an .eh_frame")},
		&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "name with spaces (int, long)", Addr: 0x7f0000002000, Size: 1, Code: []byte{0xc3},
			LoadNs: 2000, CodeIndex: 2, Source: codeobj.SourceFIFO,
		}},
		&jitmap.CodeMove{Pid: pid, Tid: pid, TimeNs: 3000, CodeIndex: 2, OldAddr: 0x7f0000002000, NewAddr: 0x7f0000003000, Size: 1},
		&jitmap.CodeUnload{Pid: pid, Tid: pid + 2, TimeNs: 4000, CodeIndex: 1, Addr: 0x7f0000001000},
		&jitmap.FlushRequest{Pid: pid, Tid: pid + 1, TimeNs: 4500, ID: 1 << 40, Formats: 0b1001},
		&jitmap.StreamEnd{TimeNs: 5000},
	}
}

func writeStream(t testing.TB, h jitmap.JitdumpHeader, llvm bool, evs []jitmap.Event, extra func(*jitdumptest.Writer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := jitdumptest.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	w.LLVM14Style = llvm
	for i, ev := range evs {
		if i == 1 && extra != nil {
			extra(w)
		}
		if err := w.WriteEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestJitdumpRoundTrip(t *testing.T) {
	const pid = 4242
	for _, tc := range []struct {
		name      string
		bigEndian bool
		llvm      bool
	}{{"little", false, false}, {"big", true, false}, {"llvm14", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			want := sampleEvents(pid)
			h := jitmap.JitdumpHeader{BigEndian: tc.bigEndian, Version: 1, ElfMach: 62, Pid: pid, TimestampNs: 77, Flags: 0}
			stream := writeStream(t, h, tc.llvm, want, func(w *jitdumptest.Writer) {
				// Unwinding info for the next load, its .eh_frame_hdr left out of it, and a
				// record a reader must skip: an id nobody knows.
				if err := w.UnwindingInfo(1500, 8, 16, append(bytes.Repeat([]byte{0xee}, 32), bytes.Repeat([]byte{0xdd}, 8)...)); err != nil {
					t.Fatal(err)
				}
				if err := w.Record(0x1234, 1600, []byte("future record body")); err != nil {
					t.Fatal(err)
				}
			})
			want[1].(*jitmap.CodeLoad).FrameInfo = bytes.Repeat([]byte{0xee}, 32)
			d := jitmap.NewDecoder(pid, codeobj.SourceFIFO, jitmap.DecoderOptions{})
			got, errs := d.Write(stream)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %s\nwant %s", dump(got), dump(want))
			}
			gh, ok := d.JitdumpHeader()
			if !ok || gh != h {
				t.Errorf("header %+v, want %+v", gh, h)
			}
			if d.Offset() != int64(len(stream)) || d.Buffered() != 0 {
				t.Errorf("offset %d buffered %d, want %d 0", d.Offset(), d.Buffered(), len(stream))
			}
			// Every split point, and byte by byte, decodes the same.
			for cut := 1; cut < len(stream); cut++ {
				got, errs := decodeChunks(t, pid, codeobj.SourceFIFO, jitmap.DecoderOptions{}, stream, cut)
				if len(errs) > 0 || !reflect.DeepEqual(got, want) {
					t.Fatalf("split at %d: %d errors %v; events equal: %v", cut, len(errs), errs, reflect.DeepEqual(got, want))
				}
			}
			cuts := make([]int, 0, len(stream))
			for i := 1; i < len(stream); i++ {
				cuts = append(cuts, i)
			}
			if got, errs := decodeChunks(t, pid, codeobj.SourceFIFO, jitmap.DecoderOptions{}, stream, cuts...); len(errs) > 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("byte by byte: errors %v; got %s", errs, dump(got))
			}
		})
	}
}

// A jitdump whose header says its times are cycle-counter values (perf's Java agent with
// JITDUMP_USE_ARCH_TIMESTAMP=1) is decoded with each record timed by Now as it is decoded,
// its loads taken as perf-map lines are, and one error, at the header, says so.
func TestJitdumpArchTimestamps(t *testing.T) {
	const pid = 4242
	written := sampleEvents(pid)
	h := jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: pid, TimestampNs: 77, Flags: jitmap.JitdumpFlagArchTimestamp}
	stream := writeStream(t, h, false, written, nil)
	const now = 9000 // far from the times written
	d := jitmap.NewDecoder(pid, codeobj.SourceFIFO, jitmap.DecoderOptions{Now: func() int64 { return now }})
	got, errs := d.Write(stream)
	if len(errs) != 1 || !errors.Is(errs[0], jitmap.ErrArchTimestamps) {
		t.Fatalf("errors %v, want one ErrArchTimestamps", errs)
	}
	if de := (*jitmap.DecodeError)(nil); !errors.As(errs[0], &de) || de.Offset != 0 || de.Fatal() {
		t.Errorf("%v: want a non-fatal error at the header (offset 0)", errs[0])
	}
	want := sampleEvents(pid)
	retime(want, readAt(now), true)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded:\n got %s\nwant %s", dump(got), dump(want))
	}
}

// A jitdump whose records are timed ahead of CLOCK_MONOTONIC (a JIT that writes
// CLOCK_REALTIME) is decoded as written up to the first record timed more than a second
// after Now, and from that record on timed by Now, its loads without a time; one error, at
// that record, says so.
func TestJitdumpClockAhead(t *testing.T) {
	const pid, now = 4242, 3500 // the sample events' times go 1000 ... 5000
	for _, tc := range []struct {
		name   string
		ahead  int64 // how far the records' times are moved
		from   int   // the first event moved
		wantAt int   // the first event timed by Now; -1: none
	}{
		{"on time", 0, 0, -1},
		{"within a second", 999_000_000, 0, -1},
		{"ahead", 1 << 60, 0, 0},
		{"ahead from the move on", 1 << 40, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			written := sampleEvents(pid)
			retime(written[tc.from:], later(tc.ahead), false)
			stream := writeStream(t, jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: pid}, false, written, nil)
			d := jitmap.NewDecoder(pid, codeobj.SourceFIFO, jitmap.DecoderOptions{Now: func() int64 { return now }})
			got, errs := d.Write(stream)
			want := sampleEvents(pid)
			retime(want[tc.from:], later(tc.ahead), false)
			if tc.wantAt >= 0 {
				retime(want[tc.wantAt:], readAt(now), true)
			}
			if tc.wantAt < 0 && len(errs) > 0 || tc.wantAt >= 0 && (len(errs) != 1 || !errors.Is(errs[0], jitmap.ErrClockAhead)) {
				t.Fatalf("errors %v", errs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded:\n got %s\nwant %s", dump(got), dump(want))
			}
		})
	}
}

// A jitdump of a process whose clock is ahead of the decoder's (a time namespace of its own)
// is decoded in the decoder's clock: ClockOffsetNs is taken off every record's time, and
// records that are on time then are not taken for a clock ahead.
func TestJitdumpClockOffset(t *testing.T) {
	const pid, offset, now = 4242, int64(100_000e9), 6000 // the records: 1000 ... 5000 + offset
	written := sampleEvents(pid)
	retime(written, later(offset), false)
	stream := writeStream(t, jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: pid}, false, written, nil)
	opts := jitmap.DecoderOptions{Now: func() int64 { return now }, ClockOffsetNs: offset}
	got, errs := jitmap.NewDecoder(pid, codeobj.SourceFIFO, opts).Write(stream)
	if want := sampleEvents(pid); len(errs) > 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("errors %v; decoded:\n got %s\nwant %s", errs, dump(got), dump(want))
	}
}

// retime gives each of evs the time at returns for its own. With unknown, its loads have
// no time of their own, as a decoder that times records as it reads them has them.
func retime(evs []jitmap.Event, at func(int64) int64, unknown bool) {
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *jitmap.CodeLoad:
			ev.Object.LoadNs, ev.TimeUnknown = at(ev.Object.LoadNs), unknown
		case *jitmap.CodeMove:
			ev.TimeNs = at(ev.TimeNs)
		case *jitmap.CodeUnload:
			ev.TimeNs = at(ev.TimeNs)
		case *jitmap.FlushRequest:
			ev.TimeNs = at(ev.TimeNs)
		case *jitmap.StreamEnd:
			ev.TimeNs = at(ev.TimeNs)
		}
	}
}

// later returns a retime function that adds d; readAt, one that gives every event the time
// at.
func later(d int64) func(int64) int64   { return func(t int64) int64 { return t + d } }
func readAt(at int64) func(int64) int64 { return func(int64) int64 { return at } }

func dump(evs []jitmap.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *jitmap.CodeLoad:
			b.WriteString("\n  load ")
			b.WriteString(strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf("%+v", *ev)), "\n", " "))
		default:
			b.WriteString("\n  " + fmt.Sprintf("%T %+v", ev, ev))
		}
	}
	return b.String()
}

func TestDetectFormat(t *testing.T) {
	for _, tc := range []struct {
		in string
		f  jitmap.Format
		ok bool
	}{
		{"", jitmap.FormatUnknown, false},
		{"D", jitmap.FormatUnknown, false},
		{"DTi", jitmap.FormatUnknown, false},
		{"DTiJ", jitmap.FormatJitdump, true},
		{"JiT", jitmap.FormatUnknown, false},
		{"JiTD\x00", jitmap.FormatJitdump, true},
		{"J1", jitmap.FormatPerfMap, true},
		{"7f00 10 f\n", jitmap.FormatPerfMap, true},
		{"DTix", jitmap.FormatPerfMap, true},
	} {
		f, ok := jitmap.DetectFormat([]byte(tc.in))
		if f != tc.f || ok != tc.ok {
			t.Errorf("jitmap.DetectFormat(%q) = %v, %v; want %v, %v", tc.in, f, ok, tc.f, tc.ok)
		}
	}
}

func TestJitdumpHugeLengthsAreFatal(t *testing.T) {
	var buf bytes.Buffer
	w, _ := jitdumptest.NewWriter(&buf, jitmap.JitdumpHeader{Pid: 1})
	good := sampleEvents(1)[:1]
	for _, ev := range good {
		_ = w.WriteEvent(ev)
	}
	prefix := len(buf.Bytes())
	// A record claiming 4 GiB - 1: an error naming its offset, no allocation.
	_ = w.Record(jitmap.JitdumpCodeLoad, 1, nil)
	stream := buf.Bytes()
	copy(stream[prefix+4:], []byte{0xff, 0xff, 0xff, 0xff})
	stream = append(stream, bytes.Repeat([]byte{0}, 100)...)
	d := jitmap.NewDecoder(1, codeobj.SourceFIFO, jitmap.DecoderOptions{})
	evs, errs := d.Write(stream)
	if len(evs) != 1 || len(errs) != 1 {
		t.Fatalf("events %d errors %v; want 1 event and 1 error", len(evs), errs)
	}
	var de *jitmap.DecodeError
	if !errors.As(errs[0], &de) || de.Offset != int64(prefix) || !errors.Is(de, jitmap.ErrRecordTooLarge) || !errors.Is(de, jitmap.ErrStreamDead) || !de.Fatal() {
		t.Fatalf("error %v; want fatal jitmap.ErrRecordTooLarge at offset %d", errs[0], prefix)
	}
	if d.Err() == nil || d.Buffered() != 0 {
		t.Errorf("Err %v buffered %d", d.Err(), d.Buffered())
	}
	if evs, errs := d.Write(stream[:60]); evs != nil || errs != nil {
		t.Errorf("dead decoder produced %v %v", evs, errs)
	}

	// The header's own total_size is checked the same way.
	hdr := append([]byte(nil), stream[:jitdumpHeaderBytes]...)
	copy(hdr[8:], []byte{0, 0, 0, 0x80})
	_, errs = jitmap.NewDecoder(1, codeobj.SourceFIFO, jitmap.DecoderOptions{}).Write(hdr)
	if len(errs) != 1 || !errors.As(errs[0], &de) || de.Offset != 0 || !errors.Is(de, jitmap.ErrRecordTooLarge) {
		t.Fatalf("huge header: %v", errs)
	}
}

// jitdumpHeaderBytes is the size of a jitdump file header.
const jitdumpHeaderBytes = 40

// TestNamespacePid: a JIT in a pid namespace writes its own namespace's pid in its records;
// with DecoderOptions.NamespacePid they are the process's, given its pid as profd sees it,
// and records of any other pid are still refused.
func TestNamespacePid(t *testing.T) {
	const host, inner = 4242, 6
	evs := sampleEvents(inner)
	stream := writeStream(t, jitmap.JitdumpHeader{Pid: inner}, false, evs, nil)
	got, errs := decodeChunks(t, host, codeobj.SourceJitdumpFile, jitmap.DecoderOptions{NamespacePid: inner}, stream)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := sampleEvents(host)
	for i := range want {
		if ld, ok := want[i].(*jitmap.CodeLoad); ok {
			ld.Object.Source = codeobj.SourceJitdumpFile
			ld.Tid -= host - inner
		}
		switch ev := want[i].(type) {
		case *jitmap.CodeMove:
			ev.Tid -= host - inner
		case *jitmap.CodeUnload:
			ev.Tid -= host - inner
		case *jitmap.FlushRequest:
			ev.Tid -= host - inner
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("namespace pid records:\n%s\nwant\n%s", dump(got), dump(want))
	}
	// Without it, the same records are another process's: every one refused.
	got, errs = decodeChunks(t, host, codeobj.SourceJitdumpFile, jitmap.DecoderOptions{}, stream)
	if n := len(got); n != 1 { // the StreamEnd, which names no process
		t.Errorf("without NamespacePid: %d events kept, want only the stream's end: %s", n, dump(got))
	}
	for _, err := range errs {
		if !errors.Is(err, jitmap.ErrPidMismatch) {
			t.Errorf("without NamespacePid: %v, want ErrPidMismatch", err)
		}
	}
	// A third pid is refused even with it.
	other := writeStream(t, jitmap.JitdumpHeader{Pid: 7}, false, sampleEvents(7), nil)
	if got, errs := decodeChunks(t, host, codeobj.SourceJitdumpFile, jitmap.DecoderOptions{NamespacePid: inner}, other); len(got) != 1 || len(errs) != 5 {
		t.Errorf("pid 7 in a stream of %d (namespace pid %d): %d events, %d errors; want 1 and 5", host, inner, len(got), len(errs))
	}
}
