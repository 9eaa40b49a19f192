package enrich

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
)

// TestReadCodeOfThisProcess: a perf-map load carries no code; the Enricher reads it from the
// live process, and a load at an unmapped address keeps no code.
func TestReadCodeOfThisProcess(t *testing.T) {
	e := New(Options{ReadCode: true})
	code := []byte{0x55, 0x48, 0x89, 0xe5, 0x31, 0xc0, 0x5d, 0xc3}
	pid := uint32(os.Getpid())
	load := &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "jitted_function",
		Addr: uint64(uintptr(unsafe.Pointer(&code[0]))), Size: uint64(len(code))}}
	e.Load(load)
	if !bytes.Equal(load.Object.Code, code) {
		t.Errorf("code %x, want %x", load.Object.Code, code)
	}
	bad := &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "unreadable", Addr: 8, Size: 16}}
	e.Load(bad)
	if bad.Object.Code != nil {
		t.Errorf("code of an unmapped address: %x", bad.Object.Code)
	}
	if st := e.Stats(); st.CodeReads != 1 || st.CodeReadErrors != 1 {
		t.Errorf("stats %+v, want 1 code read and 1 failure", st)
	}
	// Without ReadCode nothing is read.
	off := &jitmap.CodeLoad{Pid: pid, Object: load.Object}
	off.Object.Code = nil
	New(Options{}).Load(off)
	if off.Object.Code != nil {
		t.Error("read code without ReadCode")
	}
}

// TestReadCodeOfOtherProcess reads the code of another live process's executable mapping
// and checks it against /proc/PID/mem, among loads of this process and an unreadable one.
func TestReadCodeOfOtherProcess(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := uint32(cmd.Process.Pid)
	var text *procfs.Mapping
	for range 100 {
		maps, err := procfs.ReadMaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		for i := range maps {
			if maps[i].Executable() && maps[i].Path != "" && maps[i].Path[0] == '/' {
				text = &maps[i]
				break
			}
		}
		if text != nil {
			break
		}
	}
	if text == nil {
		t.Fatal("no executable file mapping in sleep")
	}
	// The loads of two processes, in runs: each is read from its own.
	self := uint32(os.Getpid())
	code := []byte{0x55, 0x48, 0x89, 0xe5, 0x31, 0xc0, 0x5d, 0xc3}
	at := func(pid uint32, addr, size uint64) *jitmap.CodeLoad {
		return &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: addr, Size: size}}
	}
	mine := uint64(uintptr(unsafe.Pointer(&code[0])))
	loads := []*jitmap.CodeLoad{at(pid, text.Start, 64), at(pid, 8, 16), at(pid, text.Start+64, 32),
		at(self, mine, 8), at(self, mine+2, 4), at(pid, text.Start+16, 16)}
	e := New(Options{ReadCode: true})
	e.Load(loads...)
	mem, err := os.Open(procfs.Path(pid, "mem"))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	want := make([]byte, 96)
	if _, err := mem.ReadAt(want, int64(text.Start)); err != nil {
		t.Fatal(err)
	}
	for i, w := range [][]byte{want[:64], nil, want[64:96], code, code[2:6], want[16:32]} {
		if got := loads[i].Object.Code; !bytes.Equal(got, w) || (w == nil) != (got == nil) {
			t.Errorf("load %d (pid %d %#x+%d): code %x, want %x", i, loads[i].Pid, loads[i].Object.Addr, loads[i].Object.Size, got, w)
		}
	}
	if st := e.Stats(); st.CodeReads != 5 || st.CodeReadErrors != 1 {
		t.Errorf("stats %+v, want 5 code reads and 1 failure", st)
	}
}

// TestReadCodeBounded: a batch of loads that ask for much code (a 64 KiB read of a perf map
// holds some 4 000 lines of up to 1 MiB each) makes buffers for no more than
// MaxLoadCodeBytes, and for no more than the process's Room; the first loads in their order
// get their code, the others none, and are counted.
func TestReadCodeBounded(t *testing.T) {
	const n, size = 2048, 64 << 10 // 128 MiB asked for
	code := bytes.Repeat([]byte{0x90, 0xc3}, size/2)
	pid := uint32(os.Getpid())
	batch := func() []*jitmap.CodeLoad {
		loads := make([]*jitmap.CodeLoad, n)
		for i := range loads {
			loads[i] = &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f",
				Addr: uint64(uintptr(unsafe.Pointer(&code[0]))), Size: size}}
		}
		return loads
	}
	for _, tc := range []struct {
		name  string
		opts  Options
		bytes int64 // of code read
	}{
		{"per call", Options{ReadCode: true}, DefaultMaxLoadCodeBytes},
		{"per call, set", Options{ReadCode: true, MaxLoadCodeBytes: 4 << 20}, 4 << 20},
		{"the process's room", Options{ReadCode: true, Room: func(p uint32) int64 {
			if p != pid {
				t.Errorf("Room(%d), want Room(%d)", p, pid)
			}
			return 1<<20 + size/2
		}}, 1 << 20},
		{"no room", Options{ReadCode: true, Room: func(uint32) int64 { return -1 }}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, loads := New(tc.opts), batch()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			e.Load(loads...)
			runtime.ReadMemStats(&after)
			// The loads' buffers, and what reading them takes besides (1 MiB is ample).
			if got := int64(after.TotalAlloc - before.TotalAlloc); got > tc.bytes+1<<20 {
				t.Errorf("Load allocated %d bytes for %d loads of %d bytes, want at most %d of code", got, n, size, tc.bytes)
			}
			read := int(tc.bytes / size)
			for i, load := range loads {
				if got, want := load.Object.Code != nil, i < read; got != want || got && !bytes.Equal(load.Object.Code, code) {
					t.Fatalf("load %d: %d code bytes, want them read: %v", i, len(load.Object.Code), want)
				}
			}
			if st := e.Stats(); st.CodeReads != uint64(read) || st.CodeNotRead != uint64(n-read) || st.CodeReadErrors != 0 {
				t.Errorf("stats %+v, want %d code reads and %d not read", st, read, n-read)
			}
		})
	}
}

// TestDebugListWalkedOnceABatch: the code loads of one batch from a JIT that registers its
// objects with the GDB JIT interface (lli-14's MCJIT) take their discriminators from one
// walk of the process's list, not one a load: a target's list may be 65 536 entries long.
func TestDebugListWalkedOnceABatch(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	cmd, dir := testenv.MatmulMCJIT(t, "../..")
	// Its code loads with lines, decoded twice: a batch of several loads of the process
	// (lli-14 writes one for matmul's module).
	var loads []*jitmap.CodeLoad
	for deadline := time.Now().Add(20 * time.Second); len(loads) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("lli-14 wrote no code load with lines in 20 s")
		}
		dumps, _ := filepath.Glob(filepath.Join(dir, ".debug", "jit", "*", "jit-*.dump"))
		if len(dumps) != 1 {
			continue
		}
		b, err := os.ReadFile(dumps[0])
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			evs, _ := jitmap.NewDecoder(uint32(cmd.Process.Pid), codeobj.SourceJitdumpFile, jitmap.DecoderOptions{}).Write(b)
			for _, ev := range evs {
				if l, ok := ev.(*jitmap.CodeLoad); ok && len(l.Object.Lines) > 0 {
					loads = append(loads, l)
				}
			}
		}
	}
	e := New(Options{ReadDiscriminators: true})
	e.Load(loads...)
	if st := e.Stats(); st.DebugWalks != 1 || st.DiscriminatedLoads == 0 {
		t.Errorf("%d loads: %d walks of the debug objects, %d loads given discriminators; want 1 walk, some loads",
			len(loads), st.DebugWalks, st.DiscriminatedLoads)
	}
}
