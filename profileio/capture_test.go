package profileio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
)

// testContainerID is a container id as Docker gives them.
const testContainerID = "3f4e1b2c9d8a7f6e5d4c3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5"

// captureStep is one writer call and what it adds to the capture a reader must see.
type captureStep struct {
	write  func(cw *CaptureWriter) error
	expect func(c *Capture)
}

// testCaptureSteps streams testObjects through a CaptureWriter: processes, objects, an
// unload, samples in two batches (the second out of order and repeating offsets), samples
// outside JIT code, and the end.
func testCaptureSteps() []captureStep {
	objs := testObjects()
	pids := []uint32{100, 100, 200}
	var steps []captureStep
	for _, p := range []Process{{Pid: 100, Command: "lli-14"}, {Pid: 200, Command: "lli-14 -jit-kind=mcjit"}, {Pid: 300, Command: "lli", Executable: "/usr/lib/llvm-14/bin/lli"},
		{Pid: 400, Command: "node", Executable: "/usr/local/bin/node", CommandLine: []string{"node", "--perf-basic-prof", "server.js", "a b", ""},
			CgroupPath: "/system.slice/docker-" + testContainerID + ".scope", ContainerID: testContainerID, ServiceName: "checkout"},
		{Pid: 500, Command: "java", CgroupPath: "/kubepods/besteffort/pod0f1a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8/" + testContainerID, ContainerID: testContainerID},
	} {
		steps = append(steps, captureStep{
			write:  func(cw *CaptureWriter) error { return cw.AddProcess(p) },
			expect: func(c *Capture) { c.Processes = append(c.Processes, p) },
		})
	}
	for i := range objs {
		o := objs[i]
		steps = append(steps, captureStep{
			write: func(cw *CaptureWriter) error {
				id, err := cw.AddCodeObject(pids[i], &o)
				if err == nil && id != ObjectID(i) {
					return errors.New("object ids out of order")
				}
				return err
			},
			expect: func(c *Capture) {
				c.Objects = append(c.Objects, &CaptureObject{ID: ObjectID(i), Pid: pids[i], Object: o})
			},
		})
	}
	steps = append(steps,
		captureStep{
			write:  func(cw *CaptureWriter) error { return cw.SetUnload(0, 1_400_000_000) },
			expect: func(c *Capture) { c.Objects[0].Object.UnloadNs = 1_400_000_000 },
		},
		captureStep{
			write: func(cw *CaptureWriter) error {
				return cw.AddSamples([]SampleRecord{{0, 0, 5}, {0, 0x12, 40}, {0, 0x21, 7}, {1, 4, 9}, {2, 0x30, 3}})
			},
			expect: func(c *Capture) {
				c.Objects[0].Samples = []OffsetCount{{0, 5}, {0x12, 40}, {0x21, 7}}
				c.Objects[1].Samples = []OffsetCount{{4, 9}}
				c.Objects[2].Samples = []OffsetCount{{0x30, 3}}
			},
		},
		captureStep{
			write: func(cw *CaptureWriter) error {
				return cw.AddSamples([]SampleRecord{{2, 0x30, 1}, {0, 0x12, 2}, {1, 0, 1}, {0, 0x3f, 1}})
			},
			expect: func(c *Capture) {
				c.Objects[0].Samples = []OffsetCount{{0, 5}, {0x12, 42}, {0x21, 7}, {0x3f, 1}}
				c.Objects[1].Samples = []OffsetCount{{0, 1}, {4, 9}}
				c.Objects[2].Samples = []OffsetCount{{0x30, 4}}
			},
		},
		captureStep{
			write: func(cw *CaptureWriter) error {
				return cw.AddUnmapped([]UnmappedCount{{100, "/usr/lib/llvm-14/bin/lli", 30}, {100, "[kernel]", 11}, {200, "[anon]", 2}, {100, "[kernel]", 1}})
			},
			expect: func(c *Capture) {
				c.Unmapped = []UnmappedCount{{100, "/usr/lib/llvm-14/bin/lli", 30}, {100, "[kernel]", 12}, {200, "[anon]", 2}}
			},
		},
		captureStep{
			write: func(cw *CaptureWriter) error {
				return cw.AddUnnamed([]UnnamedCount{{Pid: 100, IP: 0x7f00dead0010, FirstNs: 1_500_000_000, LastNs: 1_900_000_000, Count: 3},
					{Pid: 200, IP: 0x7f00beef0000, FirstNs: 2_000_000_000, LastNs: 2_000_000_000, Count: 1}})
			},
			expect: func(c *Capture) {
				c.Unnamed = []UnnamedCount{{Pid: 100, IP: 0x7f00dead0010, FirstNs: 1_500_000_000, LastNs: 1_900_000_000, Count: 3},
					{Pid: 200, IP: 0x7f00beef0000, FirstNs: 2_000_000_000, LastNs: 2_000_000_000, Count: 1}}
			},
		},
		captureStep{
			write: func(cw *CaptureWriter) error {
				return cw.AddNative(&NativeMapping{Pid: 100, File: testNativeFile, BuildID: "0badc0de",
					Start: 0x555500001000, Limit: 0x555500800000, Offset: 0x1000,
					Samples: []NativeSample{{0x555500002000, "", 2}, {0x555500001100, "heap_form_minimal_tuple", 7}, {0x555500001180, "heap_form_minimal_tuple", 3}}})
			},
			expect: func(c *Capture) {
				c.Native = []*NativeMapping{{Pid: 100, File: testNativeFile, BuildID: "0badc0de",
					Start: 0x555500001000, Limit: 0x555500800000, Offset: 0x1000,
					Samples: []NativeSample{{0x555500001100, "heap_form_minimal_tuple", 7}, {0x555500001180, "heap_form_minimal_tuple", 3},
						{0x555500002000, "", 2}}}}
			},
		},
		captureStep{ // the same mapping again: readers merge it
			write: func(cw *CaptureWriter) error {
				return cw.AddNative(&NativeMapping{Pid: 100, File: testNativeFile, BuildID: "0badc0de",
					Start: 0x555500001000, Limit: 0x555500800000, Offset: 0x1000,
					Samples: []NativeSample{{0x555500001100, "heap_form_minimal_tuple", 1}, {0x555500003000, "BufFileRead", 4}}})
			},
			expect: func(c *Capture) {
				c.Native = []*NativeMapping{{Pid: 100, File: testNativeFile, BuildID: "0badc0de",
					Start: 0x555500001000, Limit: 0x555500800000, Offset: 0x1000,
					Samples: []NativeSample{{0x555500001100, "heap_form_minimal_tuple", 8}, {0x555500001180, "heap_form_minimal_tuple", 3},
						{0x555500002000, "", 2}, {0x555500003000, "BufFileRead", 4}}}}
			},
		},
		captureStep{
			write:  func(cw *CaptureWriter) error { return cw.AddStacks(testStacks()) },
			expect: func(c *Capture) { c.Stacks = testStacks() },
		},
		captureStep{
			write: func(cw *CaptureWriter) error {
				return cw.Close(CaptureEnd{EndNs: 3_000_000_000, EndTime: time.Unix(1763769602, 0).UTC(), LostSamples: 6})
			},
			expect: func(c *Capture) {
				c.End = &CaptureEnd{EndNs: 3_000_000_000, EndTime: time.Unix(1763769602, 0).UTC(), LostSamples: 6}
			},
		},
	)
	return steps
}

// testStacks are two call chains of process 100: JIT code called from JIT code called
// from native code, and the kernel under JIT code, cut.
func testStacks() []StackSample {
	return []StackSample{
		{Pid: 100, Tid: 101, Comm: "worker", Count: 9, Frames: []Frame{
			{Object: 1, Offset: 4, Address: 0x7f0000001004},
			{Object: 0, Offset: 0x11, Address: 0x7f0000000011},
			{Object: NoObject, Address: 0x555500001100, Function: "heap_form_minimal_tuple", Mapping: testNativeFile},
			{Object: NoObject, Address: 0x555500000ff0, Mapping: testNativeFile},
		}},
		{Pid: 100, Tid: 100, Comm: "lli-14", Cut: true, Count: 2, Frames: []Frame{
			{Object: NoObject, Address: 0xffffffff81000010, Function: "do_syscall_64", Mapping: "[kernel]"},
			{Object: 0, Offset: 0x20, Address: 0x7f0000000020},
		}},
	}
}

// testNativeFile is the file of the test capture's native mapping: a path no test machine
// has, so that pprof cannot symbolize it from the local file system.
const testNativeFile = "/opt/profd-test/bin/postgres"

// nativeStep is the index of the first of the two steps that add native samples.
func nativeStep() int {
	c := &Capture{}
	for i, s := range testCaptureSteps() {
		s.expect(c)
		if c.Native != nil {
			return i
		}
	}
	panic("no native step")
}

// TestCaptureBeforeNative reads a capture of format version 1 written before native
// sections existed (the golden file of that time): everything but native samples, stacks
// and the objects' first lines, as then.
func TestCaptureBeforeNative(t *testing.T) {
	b, err := os.ReadFile("testdata/capture-before-native.profd")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadCapture(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := &Capture{Version: 1, Meta: testCaptureMeta()}
	for i, s := range testCaptureSteps() {
		if i != nativeStep() && i != nativeStep()+1 {
			s.expect(want)
		}
	}
	for _, o := range want.Objects {
		o.Object.FirstLine = 0
	}
	want.Stacks = nil // the file predates stacks sections
	// and process_info sections
	want.Processes = slices.DeleteFunc(want.Processes, func(p Process) bool {
		return !reflect.DeepEqual(p, Process{Pid: p.Pid, Command: p.Command})
	})
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ReadCapture:\n%+v\nwant:\n%+v", c, want)
	}
}

// TestCaptureBeforeProcessAttributes reads a capture written when process_info sections
// had an executable only (the golden file of that time): the same processes, without the
// ones that have other attributes now.
func TestCaptureBeforeProcessAttributes(t *testing.T) {
	b, err := os.ReadFile("testdata/capture-before-process-attributes.profd")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadCapture(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := expectedCapture(len(testCaptureSteps()))
	want.Processes = slices.DeleteFunc(want.Processes, func(p Process) bool { return p.ContainerID != "" })
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ReadCapture:\n%+v\nwant:\n%+v", c, want)
	}
}

// TestCaptureCommandLineCut: a command line over MaxCommandLineBytes is cut there, by the
// writer and by a reader.
func TestCaptureCommandLineCut(t *testing.T) {
	long := strings.Repeat("x", MaxCommandLineBytes)
	c := &Capture{Version: CaptureVersion, Processes: []Process{{Pid: 1, Command: "x", CommandLine: []string{"prog", long}}}}
	var buf bytes.Buffer
	if err := WriteCapture(&buf, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCapture(&buf)
	if err != nil {
		t.Fatal(err)
	}
	args := got.Processes[0].CommandLine
	if len(args) != 2 || args[0] != "prog" || len(args[1]) != MaxCommandLineBytes-len("prog")-1 {
		t.Errorf("read back %d arguments, the last of %d bytes", len(args), len(args[len(args)-1]))
	}
}

// writeTestCapture streams the steps and returns the file and the file length after the
// header (boundaries[0]) and after each step.
func writeTestCapture(t testing.TB) (file []byte, boundaries []int) {
	t.Helper()
	var buf bytes.Buffer
	cw, err := NewCaptureWriter(&buf, testCaptureMeta())
	if err != nil {
		t.Fatal(err)
	}
	boundaries = append(boundaries, buf.Len())
	for i, s := range testCaptureSteps() {
		if err := s.write(cw); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		boundaries = append(boundaries, buf.Len())
	}
	return buf.Bytes(), boundaries
}

// expectedCapture is what a reader must return after the first n steps.
func expectedCapture(n int) *Capture {
	c := &Capture{Version: CaptureVersion, Meta: testCaptureMeta()}
	for _, s := range testCaptureSteps()[:n] {
		s.expect(c)
	}
	return c
}

func TestCaptureRoundTrip(t *testing.T) {
	file, _ := writeTestCapture(t)
	c, err := ReadCapture(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := expectedCapture(len(testCaptureSteps()))
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ReadCapture:\n%+v\nwant:\n%+v", c, want)
	}
	// WriteCapture of what was read writes a capture that reads back the same.
	var again bytes.Buffer
	if err := WriteCapture(&again, c); err != nil {
		t.Fatal(err)
	}
	c2, err := ReadCapture(&again)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c2, want) {
		t.Errorf("ReadCapture(WriteCapture(c)) differs:\n%+v", c2)
	}
}

func TestCaptureGolden(t *testing.T) {
	file, _ := writeTestCapture(t)
	golden(t, "capture.profd.golden", file)
}

// TestCaptureKilledWriter cuts the capture at every byte: at a section boundary, and in
// the middle of a section, the reader returns exactly the sections written before the cut.
func TestCaptureKilledWriter(t *testing.T) {
	file, boundaries := writeTestCapture(t)
	for cut := 0; cut <= len(file); cut++ {
		c, err := ReadCapture(bytes.NewReader(file[:cut]))
		if cut < boundaries[0] {
			// Without the header and the meta section there is no capture.
			if cut < captureHeaderBytes {
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("cut %d inside the file header: %v, want ErrTruncated", cut, err)
				}
				continue
			}
			if err != nil || c.Version != CaptureVersion || !c.Truncated || c.TruncatedAt != captureHeaderBytes {
				t.Fatalf("cut %d inside the meta section: %+v, %v", cut, c, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		steps := 0
		for steps+1 < len(boundaries) && boundaries[steps+1] <= cut {
			steps++
		}
		want := expectedCapture(steps)
		if cut != boundaries[steps] {
			want.Truncated, want.TruncatedAt = true, int64(boundaries[steps])
		}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("cut %d (after %d steps):\n%+v\nwant:\n%+v", cut, steps, c, want)
		}
	}
}

// TestCaptureCorruptSection flips one payload byte of each section: the reader reports
// the section's offset and returns the sections before it.
func TestCaptureCorruptSection(t *testing.T) {
	file, boundaries := writeTestCapture(t)
	offsets := append([]int{captureHeaderBytes}, boundaries[:len(boundaries)-1]...)
	for i, off := range offsets {
		bad := append([]byte(nil), file...)
		bad[off+sectionHeaderBytes] ^= 0x40
		c, err := ReadCapture(bytes.NewReader(bad))
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) || pe.Offset != int64(off) {
			t.Fatalf("section %d at %d corrupted: %v", i, off, err)
		}
		if i == 0 {
			continue
		}
		if want := expectedCapture(i - 1); !reflect.DeepEqual(c, want) {
			t.Errorf("section %d corrupted: capture before it:\n%+v\nwant:\n%+v", i, c, want)
		}
	}
}

// A checksum-valid section whose contents lie is refused, not trusted.
func TestCaptureLyingSections(t *testing.T) {
	file, boundaries := writeTestCapture(t)
	section := func(kind uint32, payload []byte) []byte {
		h := make([]byte, sectionHeaderBytes)
		binary.LittleEndian.PutUint32(h, kind)
		binary.LittleEndian.PutUint32(h[4:], uint32(len(payload)))
		binary.LittleEndian.PutUint32(h[8:], sectionCRC(kind, uint32(len(payload)), payload))
		return append(h, payload...)
	}
	prefix := file[:boundaries[len(boundaries)-2]] // everything but the end section
	for _, tc := range []struct {
		name string
		sec  []byte
		err  error
	}{
		{"samples for unknown object", section(secSamples, []byte{1, 99<<1&0x7f | 1, 0, 1}), ErrMalformed},
		{"billion records", section(secSamples, binary.AppendUvarint(nil, 1e9)), ErrMalformed},
		{"object id out of order", section(secCodeObject, []byte{7}), ErrMalformed},
		{"code longer than payload", section(secCodeObject, append([]byte{3, 1, 1, 'f', 0x80, 0x20, 0x80, 0x80, 0x04}, 0, 0, 0, 0, 1)), ErrMalformed},
		{"trailing bytes", section(secUnload, []byte{0, 2, 0}), ErrMalformed},
		{"unload of unknown object", section(secUnload, []byte{9, 2}), ErrMalformed},
		{"oversized section", func() []byte {
			h := make([]byte, sectionHeaderBytes)
			binary.LittleEndian.PutUint32(h, secSamples)
			binary.LittleEndian.PutUint32(h[4:], maxSectionBytes+1)
			return h
		}(), ErrTooLarge},
	} {
		in := append(append([]byte(nil), prefix...), tc.sec...)
		c, err := ReadCapture(bytes.NewReader(in))
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, tc.err) || pe.Offset != int64(len(prefix)) {
			t.Errorf("%s: %v, want %v at offset %d", tc.name, err, tc.err, len(prefix))
			continue
		}
		if len(c.Objects) != 3 {
			t.Errorf("%s: sections before the bad one lost: %d objects", tc.name, len(c.Objects))
		}
	}
	for _, v := range []string{"\x00", "\x03"} {
		if _, err := ReadCapture(bytes.NewReader([]byte("PROFDCAP" + v + "\x00\x00\x00\x00\x00\x00\x00"))); !errors.Is(err, ErrUnsupported) {
			t.Errorf("version %q: %v, want ErrUnsupported", v, err)
		}
	}
	if _, err := ReadCapture(bytes.NewReader([]byte("NOTACAPTURE-----"))); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad magic: %v, want ErrMalformed", err)
	}
}

func TestCaptureWriterRefuses(t *testing.T) {
	cw, err := NewCaptureWriter(&bytes.Buffer{}, CaptureMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cw.AddSamples([]SampleRecord{{Object: 0, Offset: 1, Count: 1}}); !errors.Is(err, ErrMalformed) {
		t.Errorf("samples for no object: %v", err)
	}
	objs := testObjects()
	objs[0].Code = objs[0].Code[:3]
	if _, err := cw.AddCodeObject(1, &objs[0]); !errors.Is(err, ErrMalformed) {
		t.Errorf("code bytes shorter than size: %v", err)
	}
	if err := cw.Close(CaptureEnd{}); err != nil {
		t.Fatal(err)
	}
	if err := cw.AddProcess(Process{Pid: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestCaptureLargeSampleBatchSplits(t *testing.T) {
	var buf bytes.Buffer
	cw, err := NewCaptureWriter(&buf, CaptureMeta{Event: "cpu-clock"})
	if err != nil {
		t.Fatal(err)
	}
	o := testObjects()[1]
	o.Size = 1 << 40
	if _, err := cw.AddCodeObject(1, &o); err != nil {
		t.Fatal(err)
	}
	recs := make([]SampleRecord, 2_000_000)
	for i := range recs {
		recs[i] = SampleRecord{Object: 0, Offset: uint64(i) * 1000, Count: 1 << 20}
	}
	if err := cw.AddSamples(recs); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCapture(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Objects[0].Samples); n != len(recs) || c.Objects[0].Samples[n-1].Offset != uint64(n-1)*1000 {
		t.Fatalf("read %d samples back, want %d", n, len(recs))
	}
}

func FuzzReadCapture(f *testing.F) {
	file, boundaries := writeTestCapture(f)
	f.Add(file)
	f.Add(file[:boundaries[3]+20]) // inside a process_info section with every key
	f.Add(file[:boundaries[5]+5])
	f.Add(file[:boundaries[len(boundaries)-2]])
	if v1, err := os.ReadFile("testdata/capture-before-native.profd"); err == nil {
		f.Add(v1)
	}
	f.Add(file[:boundaries[nativeStep()]+40])      // inside the first native section
	f.Add(file[:boundaries[nativeStep()+2]])       // after the native sections, before the end
	f.Add(file[:boundaries[len(boundaries)-3]+30]) // inside the stacks section
	inlined, _ := inlinedCapture(f)
	f.Add(inlined)
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ReadCapture(bytes.NewReader(in))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is no *ParseError: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := WriteCapture(&out, c); err != nil {
			t.Fatalf("writing what was read: %v", err)
		}
		c2, err := ReadCapture(&out)
		if err != nil {
			t.Fatalf("reading what was written: %v", err)
		}
		c.Truncated, c.TruncatedAt = false, 0
		c.Version = CaptureVersion // an older version is written as the current one
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("capture round trip differs:\n%+v\n%+v", c, c2)
		}
	})
}

// TestCaptureObjectLargerThanASection: a code object whose code bytes alone pass a
// section's bound is recorded without them, its samples kept; one whose line table passes it
// too, without either.
func TestCaptureObjectLargerThanASection(t *testing.T) {
	var buf bytes.Buffer
	cw, err := NewCaptureWriter(&buf, CaptureMeta{Event: "cpu-clock"})
	if err != nil {
		t.Fatal(err)
	}
	code := make([]byte, maxSectionBytes)
	big := codeobj.Object{Name: "region", Addr: 0x10000, Size: uint64(len(code)), Code: code,
		Lines: []codeobj.LineEntry{{Addr: 0x10000, File: "region.c", Line: 1}}}
	dir := strings.Repeat("d", 1<<20) // file names of a MiB each: 65 of them pass the bound
	lines := make([]codeobj.LineEntry, maxSectionBytes>>20+1)
	for i := range lines {
		lines[i] = codeobj.LineEntry{Addr: 0x20000 + uint64(i)*4, File: dir + "/" + strconv.Itoa(i) + ".c", Line: uint32(i + 1)}
	}
	huge := codeobj.Object{Name: "lines", Addr: 0x20000, Size: uint64(4 * len(lines)), Lines: lines}
	for _, o := range []*codeobj.Object{&big, &huge} {
		id, err := cw.AddCodeObject(7, o)
		if err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
		if err := cw.AddSamples([]SampleRecord{{Object: id, Offset: 0, Count: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Close(CaptureEnd{EndNs: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCapture(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Objects) != 2 {
		t.Fatalf("%d objects read back, want 2", len(c.Objects))
	}
	for i, want := range []struct {
		name  string
		lines int
	}{{"region", 1}, {"lines", 0}} {
		o := c.Objects[i]
		if o.Object.Name != want.name || o.Object.Code != nil || len(o.Object.Lines) != want.lines || o.TotalSamples() != 5 {
			t.Errorf("object %d: %s, %d code bytes, %d lines, %d samples; want %s without code, %d lines, 5 samples",
				i, o.Object.Name, len(o.Object.Code), len(o.Object.Lines), o.TotalSamples(), want.name, want.lines)
		}
	}
}
