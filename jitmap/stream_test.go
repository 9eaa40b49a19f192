package jitmap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// fuzzSeeds are streams a FIFO reader sees: a jitdump stream as profd_jit.h writes it (every
// record type), perf-map text with bad lines, a writer restart mid-stream, a big-endian
// header, a truncated record, a record whose length lies, and sessions that each end where
// the next begins (inside a record that claims the most runFuzz allows, inside a line).
func fuzzSeeds(f *testing.F) [][]byte {
	var b bytes.Buffer
	w, err := jitdumptest.NewWriter(&b, jitmap.JitdumpHeader{Pid: 7, ElfMach: 62, TimestampNs: 5})
	if err != nil {
		f.Fatal(err)
	}
	w.CodeLoad(&jitmap.CodeLoad{Pid: 7, Tid: 8, Object: codeobj.Object{Name: "f", Addr: 0x1000, Size: 3,
		Code: []byte{0x31, 0xc0, 0xc3}, LoadNs: 6, CodeIndex: 1,
		Lines: []codeobj.LineEntry{{Addr: 0x1000, File: "f.c", Line: 3}, {Addr: 0x1002, File: "f.c", Line: 4}}}})
	w.CodeMove(&jitmap.CodeMove{Pid: 7, Tid: 8, TimeNs: 7, CodeIndex: 1, OldAddr: 0x1000, NewAddr: 0x2000, Size: 3})
	w.CodeUnload(&jitmap.CodeUnload{Pid: 7, Tid: 8, TimeNs: 8, CodeIndex: 1, Addr: 0x2000})
	w.FlushRequest(&jitmap.FlushRequest{Pid: 7, Tid: 8, TimeNs: 8, ID: 42})
	w.CodeLoad(&jitmap.CodeLoad{Pid: 9, Tid: 9, Object: codeobj.Object{Name: "other_pid", Addr: 0x3000, Size: 1, Code: []byte{0xc3}}})
	w.Close(9)
	jd := b.Bytes()

	var be bytes.Buffer
	wb, _ := jitdumptest.NewWriter(&be, jitmap.JitdumpHeader{Pid: 7, BigEndian: true})
	wb.CodeLoad(&jitmap.CodeLoad{Pid: 7, Object: codeobj.Object{Name: "g", Addr: 0x10, Size: 1, Code: []byte{0xc3}}})

	restart := append(append([]byte(nil), jd[:len(jd)-16]...), jd...)
	lying := append([]byte(nil), jd...)
	binary.LittleEndian.PutUint32(lying[44:], 0xFFFFFFF0) // first record's total_size
	text := []byte("1000 10 a\n2000 10 b\n")
	garbage := bytes.Repeat([]byte{0xfe, 0x00}, 20)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	hdr := jd[:jitdumpHeaderBytes]
	claim := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, jitmap.JitdumpCodeLoad), 4096)
	claim = binary.LittleEndian.AppendUint64(claim, 1)
	return [][]byte{
		cat(jd, text, jd),                   // sessions in both formats, no end of file between
		cat(text[:13], jd),                  // a line cut short by a new session
		cat(jd[:len(jd)-30], jd),            // a record cut short by one
		cat(garbage, jd, garbage, text, jd), // resynchronising twice
		jd,
		be.Bytes(),
		restart,
		jd[:len(jd)-5],
		lying,
		[]byte("1000 10 a\n0x2000 0x20 b c\nnot a line\n\n3000 zz bad\n4000 1 tail-without-newline"),
		[]byte("JiT"),
		cat(hdr, hdr, hdr, hdr),
		cat(hdr, claim, hdr, claim, hdr, claim, jd),
		cat(hdr, claim, be.Bytes()[:jitdumpHeaderBytes], hdr, jd),
		cat(text[:13], hdr, text[:13], hdr, text),
	}
}

// runStream feeds data to a jitmap.Stream for pid 7, with small bounds so the fuzzer reaches them,
// in pieces cut at the given split sizes and returns what it delivered and counted.
func runStream(data []byte, splits []byte) ([]jitmap.Event, jitmap.StreamCounts) {
	var got []jitmap.Event
	st := jitmap.NewStream(7, codeobj.SourceFIFO, "fuzz", jitmap.DecoderOptions{MaxRecordBytes: 4096, MaxLineBytes: 256})
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

// jitdumpSession is a jitdump writer session of pid 7 loading names, each load carrying
// codeBytes bytes of code.
func jitdumpSession(t *testing.T, codeBytes int, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := jitdumptest.NewWriter(&b, jitmap.JitdumpHeader{Pid: 7, ElfMach: 62, TimestampNs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		code := bytes.Repeat([]byte{0x90}, codeBytes)
		if err := w.CodeLoad(&jitmap.CodeLoad{Pid: 7, Tid: 7, Object: codeobj.Object{Name: name,
			Addr: 0x1000 * uint64(i+1), Size: uint64(codeBytes), Code: code, LoadNs: int64(i + 2)}}); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func loadNames(evs []jitmap.Event) []string {
	var out []string
	for _, ev := range evs {
		if l, ok := ev.(*jitmap.CodeLoad); ok {
			out = append(out, l.Object.Name)
		}
	}
	return out
}

// TestStreamSessions: one writer session follows another in a stream with no end of file
// between them (a FIFO reader that was not scheduled in between, a JIT that restarted its
// writer or died mid-record). Whatever the first left and however reads split the bytes,
// the second session's symbols all arrive, and so do the first's complete ones.
func TestStreamSessions(t *testing.T) {
	jd := jitdumpSession(t, 2, "a1", "a2")
	big := jitdumpSession(t, 300, "b1", "b2")
	text := []byte("1000 10 t1\n2000 10 t2\n")
	garbage := bytes.Repeat([]byte{0xff, 0x00, 0x13}, 50)
	cases := []struct {
		name          string
		first, second []byte
		want          string
	}{
		{"jitdump then jitdump", jd, jitdumpSession(t, 2, "s1", "s2"), "a1 a2 s1 s2"},
		{"jitdump then perf map", jd, []byte("3000 10 s1\n4000 10 s2\n"), "a1 a2 s1 s2"},
		{"perf map then jitdump", text, jitdumpSession(t, 2, "s1", "s2"), "t1 t2 s1 s2"},
		{"perf map cut mid-line then jitdump", text[:15], jitdumpSession(t, 2, "s1", "s2"), "t1 s1 s2"},
		{"jitdump cut mid-record then jitdump", big[:len(big)-100], jitdumpSession(t, 2, "s1", "s2"), "b1 s1 s2"},
		{"jitdump cut early in a record it claims more than the rest of the stream for", big[:len(big)-300],
			jitdumpSession(t, 2, "s1", "s2"), "b1 s1 s2"},
		{"garbage then jitdump", garbage, jitdumpSession(t, 2, "s1", "s2"), "s1 s2"},
		{"jitdump, garbage, jitdump", append(append([]byte(nil), jd...), garbage...), jitdumpSession(t, 2, "s1", "s2"), "a1 a2 s1 s2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := append(append([]byte(nil), c.first...), c.second...)
			for _, split := range []int{1, 3, 7, 13, 64, len(data)} {
				st := jitmap.NewStream(7, codeobj.SourceFIFO, "test", jitmap.DecoderOptions{})
				var evs []jitmap.Event
				for rest := data; len(rest) > 0; {
					n := min(split, len(rest))
					evs = append(evs, st.Write(rest[:n]).Events...)
					rest = rest[n:]
				}
				evs = append(evs, st.Finish().Events...)
				if got := strings.Join(loadNames(evs), " "); got != c.want {
					t.Errorf("reads of %d bytes: loads %q, want %q (counts %+v)", split, got, c.want, st.Counts())
				}
			}
		})
	}
}

// TestStreamSessionInPartialRecord: a session that begins inside a record that claims more
// than has arrived (its writer died there) is decoded when its bytes arrive, not once the
// record's length has (which may never come, and would have every session in it decode the
// bytes anew); the record is reported cut short, and Cut leaves only the new session's.
func TestStreamSessionInPartialRecord(t *testing.T) {
	big := jitdumpSession(t, 300, "b1", "b2")
	data := append(append([]byte(nil), big[:len(big)-300]...), jitdumpSession(t, 2, "s1", "s2")...)
	st := jitmap.NewStream(7, codeobj.SourceFIFO, "test", jitmap.DecoderOptions{})
	b := st.Write(data)
	if got := strings.Join(loadNames(b.Events), " "); got != "b1 s1 s2" {
		t.Errorf("loads %q, want b1 s1 s2", got)
	}
	if len(b.Errs) != 1 || !errors.Is(b.Errs[0], jitmap.ErrTruncated) {
		t.Errorf("errors %v, want the record cut short", b.Errs)
	}
	if n := st.Cut(); n != 0 {
		t.Errorf("Cut left %d bytes, want none", n)
	}
}

// TestStreamResyncCounts: a stream that went bad reports one error where it did, counts the
// bytes it skipped and decodes the session that follows.
func TestStreamResyncCounts(t *testing.T) {
	jd := jitdumpSession(t, 2, "a")
	garbage := bytes.Repeat([]byte{0xfe}, 100)
	st := jitmap.NewStream(7, codeobj.SourceFIFO, "test", jitmap.DecoderOptions{})
	b := st.Write(append(append(append([]byte(nil), jd...), garbage...), jitdumpSession(t, 2, "b")...))
	if got := strings.Join(loadNames(b.Events), " "); got != "a b" {
		t.Fatalf("loads %q", got)
	}
	if len(b.Errs) != 1 {
		t.Fatalf("errors %v, want the one where the stream went bad", b.Errs)
	}
	var de *jitmap.DecodeError
	if !errors.As(b.Errs[0], &de) || de.Offset != int64(len(jd)) {
		t.Errorf("error %v, want one at offset %d", b.Errs[0], len(jd))
	}
	if c := st.Counts(); c.Skipped != uint64(len(garbage)) || c.Restarts != 0 || c.BadRecords != 1 {
		t.Errorf("counts %+v, want %d bytes skipped, 1 bad record", c, len(garbage))
	}
}

// TestStreamCut: a stream cut mid-record (its reader stopped) reports no bad record and
// says how many bytes the partial record had; Finish, the writer's end, reports it.
func TestStreamCut(t *testing.T) {
	jd := jitdumpSession(t, 2, "a1", "a2")
	text := []byte("1000 10 t1\n2000 10 t2\n")
	for _, c := range []struct {
		name string
		data []byte
		cut  int // bytes of the partial record or line; -1: some
		want string
	}{
		{"jitdump cut mid-record", jd[:len(jd)-10], -1, "a1"},
		{"perf map cut mid-line", text[:15], 4, "t1"},
		{"whole jitdump", jd, 0, "a1 a2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := jitmap.NewStream(7, codeobj.SourceFIFO, "test", jitmap.DecoderOptions{})
			b := st.Write(c.data)
			cut := st.Cut()
			if got := strings.Join(loadNames(b.Events), " "); got != c.want || len(b.Errs) != 0 || st.Counts().BadRecords != 0 {
				t.Errorf("loads %q, errors %v, counts %+v; want %q and no bad record", got, b.Errs, st.Counts(), c.want)
			}
			if c.cut >= 0 && cut != c.cut || c.cut < 0 && cut <= 0 {
				t.Errorf("Cut = %d bytes left, want %d (-1: some)", cut, c.cut)
			}
		})
	}
	// The same cut by the writer's end is a truncated record.
	st := jitmap.NewStream(7, codeobj.SourceFIFO, "test", jitmap.DecoderOptions{})
	st.Write(jd[:len(jd)-10])
	if b := st.Finish(); len(b.Errs) != 1 || !errors.Is(b.Errs[0], jitmap.ErrTruncated) {
		t.Errorf("Finish of a partial record: %v, want ErrTruncated", b.Errs)
	}
}
