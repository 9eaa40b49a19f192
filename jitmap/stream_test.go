package jitmap_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// fuzzSeeds are streams a FIFO reader sees: a jitdump stream as profd_jit.h writes it (every
// record type), perf-map text with bad lines, a writer restart mid-stream, a big-endian
// header, a truncated record and a record whose length lies.
func fuzzSeeds(f *testing.F) [][]byte {
	var b bytes.Buffer
	w, err := jitdumptest.NewWriter(&b, jitmap.JitdumpHeader{Pid: 7, ElfMach: 62, TimestampNs: 5})
	if err != nil {
		f.Fatal(err)
	}
	w.CodeLoad(&jitmap.CodeLoad{Pid: 7, Tid: 8, Object: jitmap.CodeObject{Name: "f", Addr: 0x1000, Size: 3,
		Code: []byte{0x31, 0xc0, 0xc3}, LoadNs: 6, CodeIndex: 1,
		Lines: []jitmap.LineEntry{{Addr: 0x1000, File: "f.c", Line: 3}, {Addr: 0x1002, File: "f.c", Line: 4}}}})
	w.CodeMove(&jitmap.CodeMove{Pid: 7, Tid: 8, TimeNs: 7, CodeIndex: 1, OldAddr: 0x1000, NewAddr: 0x2000, Size: 3})
	w.CodeUnload(&jitmap.CodeUnload{Pid: 7, Tid: 8, TimeNs: 8, CodeIndex: 1, Addr: 0x2000})
	w.CodeLoad(&jitmap.CodeLoad{Pid: 9, Tid: 9, Object: jitmap.CodeObject{Name: "other_pid", Addr: 0x3000, Size: 1, Code: []byte{0xc3}}})
	w.Close(9)
	jd := b.Bytes()

	var be bytes.Buffer
	wb, _ := jitdumptest.NewWriter(&be, jitmap.JitdumpHeader{Pid: 7, BigEndian: true})
	wb.CodeLoad(&jitmap.CodeLoad{Pid: 7, Object: jitmap.CodeObject{Name: "g", Addr: 0x10, Size: 1, Code: []byte{0xc3}}})

	restart := append(append([]byte(nil), jd[:len(jd)-16]...), jd...)
	lying := append([]byte(nil), jd...)
	binary.LittleEndian.PutUint32(lying[44:], 0xFFFFFFF0) // first record's total_size
	return [][]byte{
		jd,
		be.Bytes(),
		restart,
		jd[:len(jd)-5],
		lying,
		[]byte("1000 10 a\n0x2000 0x20 b c\nnot a line\n\n3000 zz bad\n4000 1 tail-without-newline"),
		[]byte("JiT"),
	}
}

// runStream feeds data to a jitmap.Stream for pid 7, with small bounds so the fuzzer reaches them,
// in pieces cut at the given split sizes and returns what it delivered and counted.
func runStream(data []byte, splits []byte) ([]jitmap.Event, jitmap.StreamCounts) {
	var got []jitmap.Event
	st := jitmap.NewStream(7, jitmap.SourceFIFO, "fuzz", jitmap.DecoderOptions{MaxRecordBytes: 4096, MaxLineBytes: 256})
	rest := data
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if i < len(splits) {
			n = min(int(splits[i])+1, len(rest))
		}
		got = append(got, st.Write(rest[:n]).Events...)
		rest = rest[n:]
	}
	got = append(got, st.Finish().Events...)
	return got, st.Counts()
}

// FuzzStream checks the decoding path of a FIFO or file reader: whatever the bytes and however the
// reads split them, it does not panic, delivers only events of its target, counts every byte
// and delivers the same events as one whole read would.
func FuzzStream(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed, []byte{0, 3, 15, 40, 1})
		f.Add(seed, []byte{})
	}
	f.Fuzz(func(t *testing.T, data, splits []byte) {
		got, st := runStream(data, splits)
		whole, wst := runStream(data, nil)
		if st.Bytes != uint64(len(data)) {
			t.Fatalf("counted %d bytes of %d", st.Bytes, len(data))
		}
		if st.Records != uint64(len(got)) {
			t.Fatalf("counted %d records, delivered %d", st.Records, len(got))
		}
		for _, ev := range got {
			var pid uint32
			switch ev := ev.(type) {
			case *jitmap.CodeLoad:
				pid = ev.Pid
			case *jitmap.CodeMove:
				pid = ev.Pid
			case *jitmap.CodeUnload:
				pid = ev.Pid
			default:
				continue
			}
			if pid != 7 {
				t.Fatalf("delivered %T naming pid %d", ev, pid)
			}
		}
		if !reflect.DeepEqual(got, whole) || st != wst {
			t.Fatalf("split reads gave %d events %+v; one read gave %d events %+v", len(got), st, len(whole), wst)
		}
	})
}
