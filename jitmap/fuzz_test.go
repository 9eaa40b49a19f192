package jitmap_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// archSplit is the bit of FuzzJitdumpDecoder's split that gives its stream's header
// JitdumpFlagArchTimestamp.
const archSplit = 1 << 15

// FuzzJitdumpDecoder feeds arbitrary records after a valid header, with or without
// JitdumpFlagArchTimestamp. Whatever the bytes: no panic, the buffer stays bounded, a split
// anywhere decodes the same, loads have no time with the flag only, what decodes re-encodes
// (jitdumptest.Writer) to a stream that decodes to the same events, and given a clock the
// decoder times no record more than a second past it.
func FuzzJitdumpDecoder(f *testing.F) {
	for _, be := range []bool{false, true} {
		var buf bytes.Buffer
		w, _ := jitdumptest.NewWriter(&buf, jitmap.JitdumpHeader{BigEndian: be, Pid: 3})
		w.LLVM14Style = be
		for _, ev := range sampleEvents(3) {
			_ = w.WriteEvent(ev)
		}
		f.Add(be, buf.Bytes()[jitdumpHeaderBytes:], uint16(100))
		f.Add(be, buf.Bytes()[jitdumpHeaderBytes:], uint16(archSplit|100))
	}
	const maxRecord = 1 << 12
	// split's top bit sets the header's JitdumpFlagArchTimestamp; the rest is where to split.
	f.Fuzz(func(t *testing.T, bigEndian bool, records []byte, split uint16) {
		var flags uint64
		if split&archSplit != 0 {
			flags = jitmap.JitdumpFlagArchTimestamp
		}
		split &^= archSplit
		var hdr bytes.Buffer
		if _, err := jitdumptest.NewWriter(&hdr, jitmap.JitdumpHeader{BigEndian: bigEndian, Pid: 3, Flags: flags}); err != nil {
			t.Fatal(err)
		}
		stream := append(hdr.Bytes(), records...)
		opts := jitmap.DecoderOptions{MaxRecordBytes: maxRecord}
		d := jitmap.NewDecoder(0, codeobj.SourceFIFO, opts)
		evs, errs := d.Write(stream)
		if d.Buffered() > maxRecord {
			t.Fatalf("buffered %d bytes with MaxRecordBytes %d", d.Buffered(), maxRecord)
		}
		e2, r2 := d.Finish()
		evs, errs = append(evs, e2...), append(errs, r2...)
		cut := int(split) % (len(stream) + 1)
		sevs, serrs := decodeChunks(t, 0, codeobj.SourceFIFO, opts, stream, cut)
		if !reflect.DeepEqual(evs, sevs) || fmt.Sprint(errs) != fmt.Sprint(serrs) {
			t.Fatalf("split at %d differs:\n%s\n%v\nvs\n%s\n%v", cut, dump(evs), errs, dump(sevs), serrs)
		}
		for _, err := range errs {
			if de, ok := err.(*jitmap.DecodeError); !ok || de.Offset < 0 || de.Offset > int64(len(stream)) {
				t.Fatalf("error %v: not a *jitmap.DecodeError with an offset in the stream", err)
			}
		}
		for _, ev := range evs {
			if load, ok := ev.(*jitmap.CodeLoad); ok && load.TimeUnknown != (flags != 0) {
				t.Fatalf("a load's time unknown %v, with header flags %#x", load.TimeUnknown, flags)
			}
		}
		var re bytes.Buffer
		w, _ := jitdumptest.NewWriter(&re, jitmap.JitdumpHeader{BigEndian: !bigEndian, Pid: 3, Flags: flags})
		for _, ev := range evs {
			if err := w.WriteEvent(ev); err != nil {
				t.Fatalf("re-encode %s: %v", dump([]jitmap.Event{ev}), err)
			}
		}
		again, aerrs := jitmap.NewDecoder(0, codeobj.SourceFIFO, jitmap.DecoderOptions{}).Write(re.Bytes())
		if flags != 0 && len(aerrs) > 0 && errors.Is(aerrs[0], jitmap.ErrArchTimestamps) {
			aerrs = aerrs[1:]
		}
		if len(aerrs) > 0 || !reflect.DeepEqual(again, evs) {
			t.Fatalf("re-encoded stream decodes differently (%v):\n%s\nvs\n%s", aerrs, dump(again), dump(evs))
		}

		// With a clock, no record is timed more than a second after it is decoded, and a
		// split anywhere decodes the same.
		const now = 1 << 40
		clocked := jitmap.DecoderOptions{MaxRecordBytes: maxRecord, Now: func() int64 { return now }}
		cevs, cerrs := decodeChunks(t, 0, codeobj.SourceFIFO, clocked, stream)
		for _, ev := range cevs {
			if at := eventTime(ev); at > now+int64(time.Second) {
				t.Fatalf("%s timed %d, past the decoder's clock %d by more than a second", dump([]jitmap.Event{ev}), at, now)
			}
		}
		sevs, serrs = decodeChunks(t, 0, codeobj.SourceFIFO, clocked, stream, cut)
		if !reflect.DeepEqual(cevs, sevs) || fmt.Sprint(cerrs) != fmt.Sprint(serrs) {
			t.Fatalf("with a clock, split at %d differs:\n%s\n%v\nvs\n%s\n%v", cut, dump(cevs), cerrs, dump(sevs), serrs)
		}
	})
}

// eventTime is the time ev carries.
func eventTime(ev jitmap.Event) int64 {
	switch ev := ev.(type) {
	case *jitmap.CodeLoad:
		return ev.Object.LoadNs
	case *jitmap.CodeMove:
		return ev.TimeNs
	case *jitmap.CodeUnload:
		return ev.TimeNs
	case *jitmap.FlushRequest:
		return ev.TimeNs
	case *jitmap.StreamEnd:
		return ev.TimeNs
	}
	return 0
}

// FuzzPerfMapDecoder: any text decodes without panic, the same at any split, every load is
// well formed, and re-printing the loads as perf-map lines decodes to the same loads.
func FuzzPerfMapDecoder(f *testing.F) {
	f.Add([]byte("7f0000001000 40 sq\n0x10 0x20 a b c\r\n\nbad line\n"), uint16(7))
	const maxLine = 256
	f.Fuzz(func(t *testing.T, text []byte, split uint16) {
		if f, ok := jitmap.DetectFormat(text); ok && f != jitmap.FormatPerfMap {
			return
		}
		opts := jitmap.DecoderOptions{MaxLineBytes: maxLine}
		evs, errs := decodeChunks(t, 7, codeobj.SourceFIFO, opts, text)
		cut := int(split) % (len(text) + 1)
		sevs, serrs := decodeChunks(t, 7, codeobj.SourceFIFO, opts, text, cut)
		if !reflect.DeepEqual(evs, sevs) || fmt.Sprint(errs) != fmt.Sprint(serrs) {
			t.Fatalf("split at %d differs:\n%s\n%v\nvs\n%s\n%v", cut, dump(evs), errs, dump(sevs), serrs)
		}
		var re bytes.Buffer
		for _, ev := range evs {
			l, ok := ev.(*jitmap.CodeLoad)
			if !ok {
				t.Fatalf("perf-map gave %T", ev)
			}
			o := l.Object
			if o.Name == "" || bytes.ContainsAny([]byte(o.Name), "\n") || o.Addr+o.Size < o.Addr || l.Pid != 7 {
				t.Fatalf("bad load %+v", l)
			}
			fmt.Fprintf(&re, "%x %x %s\n", o.Addr, o.Size, o.Name)
		}
		if len(evs) == 0 {
			return
		}
		again, aerrs := decodeChunks(t, 7, codeobj.SourceFIFO, jitmap.DecoderOptions{}, re.Bytes())
		if len(aerrs) > 0 || !reflect.DeepEqual(again, evs) {
			t.Fatalf("re-printed loads decode differently (%v):\n%s\nvs\n%s", aerrs, dump(again), dump(evs))
		}
	})
}
