package jitmap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// TestJitdumpBadRecordsSkipped: records whose length is sane but whose contents are not are
// reported at their offsets and skipped; the records after them still decode.
func TestJitdumpBadRecordsSkipped(t *testing.T) {
	var buf bytes.Buffer
	w, _ := jitdumptest.NewWriter(&buf, jitmap.JitdumpHeader{Pid: 5})
	var offsets []int64
	bad := func(id uint32, body []byte) {
		offsets = append(offsets, int64(buf.Len()))
		if err := w.Record(id, 1, body); err != nil {
			t.Fatal(err)
		}
	}
	le := binary.LittleEndian
	loadBody := func(pid uint32, name string, codeSize uint64, code []byte) []byte {
		b := le.AppendUint32(nil, pid)
		b = le.AppendUint32(b, pid)
		b = le.AppendUint64(b, 0x1000)
		b = le.AppendUint64(b, 0x1000)
		b = le.AppendUint64(b, codeSize)
		b = le.AppendUint64(b, 1)
		b = append(b, name...)
		return append(b, code...)
	}
	bad(jitmap.JitdumpCodeLoad, loadBody(5, "noNUL", 0, nil))
	bad(jitmap.JitdumpCodeLoad, loadBody(5, "f\x00", 100, []byte{1, 2, 3}))
	bad(jitmap.JitdumpCodeLoad, loadBody(6, "f\x00", 1, []byte{0xc3}))
	bad(jitmap.JitdumpCodeMove, make([]byte, 10))
	bad(jitmap.JitdumpProfdCodeUnload, make([]byte, 23))
	dbg := le.AppendUint64(nil, 0x1000)
	dbg = le.AppendUint64(dbg, 1<<40) // nr_entry far beyond the record: no allocation
	bad(jitmap.JitdumpCodeDebugInfo, dbg)
	good := sampleEvents(5)
	for _, ev := range good {
		_ = w.WriteEvent(ev)
	}
	evs, errs := decodeChunks(t, 5, codeobj.SourceFIFO, jitmap.DecoderOptions{}, buf.Bytes())
	if len(evs) != len(good) {
		t.Errorf("got %d events after bad records, want %d: %s", len(evs), len(good), dump(evs))
	}
	if len(errs) != len(offsets) {
		t.Fatalf("errors %v, want %d", errs, len(offsets))
	}
	for i, err := range errs {
		var de *jitmap.DecodeError
		if !errors.As(err, &de) || de.Offset != offsets[i] || de.Fatal() {
			t.Errorf("error %d = %v, want non-fatal at offset %d", i, err, offsets[i])
		}
	}
	if !errors.Is(errs[2], jitmap.ErrPidMismatch) {
		t.Errorf("error 2 = %v, want jitmap.ErrPidMismatch", errs[2])
	}

	// A partial record at the end of the stream is jitmap.ErrTruncated at its offset.
	stream := buf.Bytes()
	_, errs = decodeChunks(t, 5, codeobj.SourceFIFO, jitmap.DecoderOptions{}, stream[:len(stream)-3])
	last := errs[len(errs)-1]
	var de *jitmap.DecodeError
	if !errors.As(last, &de) || !errors.Is(de, jitmap.ErrTruncated) || de.Offset != int64(len(stream)-16) {
		t.Errorf("truncated stream: %v", last)
	}

	// A record shorter than its own header cannot be skipped: fatal.
	cut := append([]byte(nil), stream[:offsets[1]]...)
	cut = le.AppendUint32(cut, jitmap.JitdumpCodeLoad)
	cut = le.AppendUint32(cut, 8)
	cut = le.AppendUint64(cut, 0)
	evs, errs = decodeChunks(t, 5, codeobj.SourceFIFO, jitmap.DecoderOptions{}, append(cut, stream[offsets[1]:]...))
	if len(evs) != 0 || len(errs) != 2 || !errors.Is(errs[1], jitmap.ErrStreamDead) || !errors.As(errs[1], &de) || de.Offset != offsets[1] {
		t.Errorf("short record: events %d errors %v", len(evs), errs)
	}
}

// TestJitdumpUnwindingInfo: a CODE_UNWINDING_INFO record's .eh_frame goes to the CODE_LOAD
// after it, and to no other: not past a load that does not decode, nor from a record whose
// sizes do not fit it (reported).
func TestJitdumpUnwindingInfo(t *testing.T) {
	le := binary.LittleEndian
	unwinding := func(size, hdrSize uint64, data []byte) []byte {
		b := le.AppendUint64(nil, size)
		b = le.AppendUint64(b, hdrSize)
		b = le.AppendUint64(b, size)
		return append(b, data...)
	}
	load := func(pid uint32, addr uint64) *jitmap.CodeLoad {
		return &jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{Name: "f", Addr: addr, Size: 1, Code: []byte{0xc3}, LoadNs: 5, Source: codeobj.SourceFIFO}}
	}
	for _, c := range []struct {
		name    string
		records func(w *jitdumptest.Writer)
		want    []byte // the second load's FrameInfo
		errs    int
	}{
		{"for the next load", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(12, 4, []byte("eh_framehdr!")))
		}, []byte("eh_frame"), 0},
		{"the last of two", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(5, 0, []byte("first")))
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(6, 0, []byte("second")))
		}, []byte("second"), 0},
		{"not past a bad load", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(5, 0, []byte("stale")))
			_ = w.Record(jitmap.JitdumpCodeLoad, 1, make([]byte, 20))
		}, nil, 1},
		{"larger than its record", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(100, 0, []byte("short")))
		}, nil, 1},
		{"a header larger than it", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(5, 6, []byte("short")))
		}, nil, 1},
		{"too short a body", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, make([]byte, 20))
		}, nil, 1},
		{"only a header", func(w *jitdumptest.Writer) {
			_ = w.Record(jitmap.JitdumpCodeUnwindingInfo, 1, unwinding(4, 4, []byte("hdr!")))
		}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, _ := jitdumptest.NewWriter(&buf, jitmap.JitdumpHeader{Pid: 5})
			_ = w.CodeLoad(load(5, 0x1000))
			c.records(w)
			_ = w.CodeLoad(load(5, 0x2000))
			evs, errs := decodeChunks(t, 5, codeobj.SourceFIFO, jitmap.DecoderOptions{}, buf.Bytes())
			if len(errs) != c.errs {
				t.Errorf("errors %v, want %d", errs, c.errs)
			}
			if len(evs) != 2 {
				t.Fatalf("events %s, want the two loads", dump(evs))
			}
			first, second := evs[0].(*jitmap.CodeLoad), evs[1].(*jitmap.CodeLoad)
			if first.FrameInfo != nil || !bytes.Equal(second.FrameInfo, c.want) {
				t.Errorf("frame information %q and %q, want none and %q", first.FrameInfo, second.FrameInfo, c.want)
			}
		})
	}
}
