package jitmap_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

func TestPerfMapDecode(t *testing.T) {
	stream := "7f0000001000 40 sq\n" +
		"0x7f0000002000 0x1A JIT code: int foo(int, long) [tier 2]\r\n" +
		"\n" +
		"7F0000003000 8 x\n" +
		"zz 10 bad start\n" +
		"7f0000004000 10\n" +
		"7f0000004000 1g name\n" +
		"ffffffffffffffff 2 wraps\n" +
		"10000000000000000 1 too wide\n" +
		"  7f0000005000\t4  padded name  \n" +
		"7f0000006000 4 last-without-newline"
	now := int64(500)
	opts := jitmap.DecoderOptions{Now: func() int64 { now++; return now }}
	want := []jitmap.Event{
		&jitmap.CodeLoad{Pid: 9, TimeUnknown: true, Object: codeobj.Object{Name: "sq", Addr: 0x7f0000001000, Size: 0x40, LoadNs: 501, Source: codeobj.SourceFIFO}},
		&jitmap.CodeLoad{Pid: 9, TimeUnknown: true, Object: codeobj.Object{Name: "JIT code: int foo(int, long) [tier 2]", Addr: 0x7f0000002000, Size: 0x1a, LoadNs: 502, Source: codeobj.SourceFIFO}},
		&jitmap.CodeLoad{Pid: 9, TimeUnknown: true, Object: codeobj.Object{Name: "x", Addr: 0x7f0000003000, Size: 8, LoadNs: 503, Source: codeobj.SourceFIFO}},
		&jitmap.CodeLoad{Pid: 9, TimeUnknown: true, Object: codeobj.Object{Name: "padded name", Addr: 0x7f0000005000, Size: 4, LoadNs: 504, Source: codeobj.SourceFIFO}},
		&jitmap.CodeLoad{Pid: 9, TimeUnknown: true, Object: codeobj.Object{Name: "last-without-newline", Addr: 0x7f0000006000, Size: 4, LoadNs: 505, Source: codeobj.SourceFIFO}},
	}
	badLines := []string{"zz 10", "7f0000004000 10\n", "7f0000004000 1g", "ffffffffffffffff", "10000000000000000"}
	var wantOffsets []int64
	for _, b := range badLines {
		wantOffsets = append(wantOffsets, int64(strings.Index(stream, b)))
	}
	for cut := 0; cut < len(stream); cut++ {
		now = 500
		var cuts []int
		if cut > 0 {
			cuts = []int{cut}
		}
		got, errs := decodeChunks(t, 9, codeobj.SourceFIFO, opts, []byte(stream), cuts...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d: got %s\nwant %s", cut, dump(got), dump(want))
		}
		if len(errs) != len(badLines) {
			t.Fatalf("split at %d: errors %v, want %d", cut, errs, len(badLines))
		}
		for i, err := range errs {
			var de *jitmap.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, jitmap.ErrBadLine) || de.Offset != wantOffsets[i] || de.Fatal() {
				t.Fatalf("split at %d: error %d = %v, want jitmap.ErrBadLine at %d", cut, i, err, wantOffsets[i])
			}
		}
	}
}

func TestPerfMapLongLineSkipped(t *testing.T) {
	long := "1000 10 " + strings.Repeat("n", 300) + "\n"
	stream := long + "2000 10 ok\n" + long + long + "3000 10 ok2\n"
	for _, cuts := range [][]int{nil, {5}, {100, 200, 320, 330}, {len(long) + 3}} {
		got, errs := decodeChunks(t, 1, codeobj.SourceFIFO, jitmap.DecoderOptions{MaxLineBytes: 64}, []byte(stream), cuts...)
		if len(got) != 2 || got[0].(*jitmap.CodeLoad).Object.Name != "ok" || got[1].(*jitmap.CodeLoad).Object.Name != "ok2" {
			t.Fatalf("cuts %v: events %s", cuts, dump(got))
		}
		if len(errs) != 3 {
			t.Fatalf("cuts %v: errors %v", cuts, errs)
		}
		for i, off := range []int64{0, int64(len(long) + 11), int64(2*len(long) + 11)} {
			var de *jitmap.DecodeError
			if !errors.As(errs[i], &de) || !errors.Is(de, jitmap.ErrLineTooLong) || de.Offset != off {
				t.Errorf("cuts %v: error %d = %v, want jitmap.ErrLineTooLong at %d", cuts, i, errs[i], off)
			}
		}
	}
}

// TestPerfMapErrorsQuoteNothing: errors about bad perf-map lines say what is wrong and where,
// never what the line holds: profd may read a root-owned map that a target's user must not
// see in profd's log, and a line may carry terminal escapes.
func TestPerfMapErrorsQuoteNothing(t *testing.T) {
	d := jitmap.NewDecoder(7, codeobj.SourcePerfMapFile, jitmap.DecoderOptions{})
	_, errs := d.Write([]byte("SECRET\x1b[31m 10 name\n1000 SECRET\x1b[31m name\n1000 10 \nSECRET\n"))
	if len(errs) != 4 {
		t.Fatalf("%d errors, want 4: %v", len(errs), errs)
	}
	for _, err := range errs {
		if s := err.Error(); strings.Contains(s, "SECRET") || strings.ContainsRune(s, 0x1b) {
			t.Errorf("error %q quotes the line", s)
		}
	}
}
