package unwind

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// trampolineFrames is the .eh_frame a JIT writes for an 11-byte trampoline that calls on
// without a frame pointer (sub $8,%rsp; call *%rcx; add $8,%rsp; ret), laid out 16 bytes
// past the code (8-byte aligned, as jitmap.FrameInfoAddr says):
//
//	CIE: length 0x14, id 0, version 1, "zR", code alignment 1, data alignment -8, return
//	     address register 16, augmentation data 0x1b (pc-relative sdata4); CFA = rsp+8,
//	     the return address at CFA-8
//	FDE: length 0x14, CIE pointer 0x1c, pc_begin -48 (the code, from the field), pc_range 11;
//	     at +4 CFA = rsp+16, at +10 CFA = rsp+8
const trampolineFrames = "1400000000000000017a5200017810011b0c070890010000" +
	"140000001c000000d0ffffff0b00000000440e10460e0800"

const trampolineSize, trampolineFramesAt = 11, 16

func trampoline(t *testing.T) []byte {
	b, err := hex.DecodeString(trampolineFrames)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// walkFrom unwinds a sample at ip whose stack holds 8 bytes of padding, then ret: the frames
// a trampoline's frame information finds (ip, ret), or ip alone where nothing describes ip
// (a frame pointer of 0 ends the walk).
func walkFrom(u *Unwinder, pid uint32, ip, ret uint64) []uint64 {
	stack := binary.LittleEndian.AppendUint64(make([]byte, 8), ret)
	stack = append(stack, make([]byte, 64)...)
	frames, _ := u.Unwind(pid, Regs{IP: ip, SP: 0x7ffd00001000, BP: 0}, stack, 16, nil)
	return frames
}

// TestJITFrames: the frame information a JIT wrote in its jitdump walks its code that keeps
// no frame pointer; it moves with the code, is replaced by code loaded over it, goes with an
// unload, and is kept only for a process the Unwinder follows.
func TestJITFrames(t *testing.T) {
	pid := uint32(os.Getpid())
	const code, moved, ret = 0x10000000, 0x20000000, 0x30000005
	u := New(Config{})
	defer u.Close()
	if err := u.AddJITFrames(pid, code, trampolineSize, trampoline(t), code+trampolineFramesAt); err != nil {
		t.Fatal(err)
	}
	if got := walkFrom(u, pid, code+6, ret); len(got) != 1 {
		t.Errorf("before the Unwinder follows the process: %#x, want the leaf alone", got)
	}
	u.Prepare(pid)
	if err := u.AddJITFrames(pid, code, trampolineSize, trampoline(t), code+trampolineFramesAt); err != nil {
		t.Fatal(err)
	}
	if got, want := walkFrom(u, pid, code+6, ret), []uint64{code + 6, ret}; !slices.Equal(got, want) {
		t.Errorf("through the trampoline: %#x, want %#x", got, want)
	}
	u.MoveJITFrames(pid, code, moved)
	if got, want := walkFrom(u, pid, moved+6, ret), []uint64{moved + 6, ret}; !slices.Equal(got, want) {
		t.Errorf("moved: %#x, want %#x", got, want)
	}
	if got := walkFrom(u, pid, code+6, ret); len(got) != 1 {
		t.Errorf("where it moved from: %#x, want the leaf alone", got)
	}
	// Code loaded over it, described at another address: the old description goes.
	if err := u.AddJITFrames(pid, moved+4, trampolineSize, trampoline(t), moved+4+trampolineFramesAt); err != nil {
		t.Fatal(err)
	}
	if got := walkFrom(u, pid, moved+2, ret); len(got) != 1 {
		t.Errorf("code replaced: %#x, want the leaf alone", got)
	}
	if got, want := walkFrom(u, pid, moved+4+6, ret), []uint64{moved + 4 + 6, ret}; !slices.Equal(got, want) {
		t.Errorf("the code loaded over it: %#x, want %#x", got, want)
	}
	held := u.TableBytes()
	u.RemoveJITFrames(pid, moved+4)
	if got := walkFrom(u, pid, moved+4+6, ret); len(got) != 1 {
		t.Errorf("unloaded: %#x, want the leaf alone", got)
	}
	if u.TableBytes() >= held {
		t.Errorf("unloaded: %d bytes held, %d before", u.TableBytes(), held)
	}
	if err := u.AddJITFrames(pid, code, trampolineSize, []byte("not an .eh_frame"), code+trampolineFramesAt); err == nil {
		t.Error("bytes that are no frame information: no error")
	}
	u.Forget(pid)
	if got := u.TableBytes(); got != 0 {
		t.Errorf("forgotten: %d bytes held", got)
	}
}

// TestJITFramesBound: a process's dumped frame information takes a quarter of
// MaxTableBytes at most; past it, code is walked as before, with one warning.
func TestJITFramesBound(t *testing.T) {
	pid := uint32(os.Getpid())
	var log bytes.Buffer
	one, err := cfi.Read(trampoline(t), 0x10000000+trampolineFramesAt)
	if err != nil {
		t.Fatal(err)
	}
	u := New(Config{MaxTableBytes: 4 * 4 * one.Bytes(), Logger: slog.New(slog.NewTextHandler(&log, nil))}) // room for four trampolines
	defer u.Close()
	u.Prepare(pid)
	for i := range uint64(6) {
		addr := 0x10000000 + i*0x100
		if err := u.AddJITFrames(pid, addr, trampolineSize, trampoline(t), addr+trampolineFramesAt); err != nil {
			t.Fatal(err)
		}
	}
	walked := 0
	for i := range uint64(6) {
		if len(walkFrom(u, pid, 0x10000000+i*0x100+6, 0x30000005)) == 2 {
			walked++
		}
	}
	if walked == 0 || walked == 6 {
		t.Errorf("%d of 6 trampolines described, want some within the bound, not all", walked)
	}
	if n := bytes.Count(log.Bytes(), []byte("level=WARN")); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log.Bytes())
	}
}

// TestDumpedList: ranges inserted in any order, removed by overlap, are found where a plain
// sorted list finds them.
func TestDumpedList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var l dumpedList
	var model []dumpedCode // sorted, not overlapping
	overlapping := func(lo, hi uint64) []dumpedCode {
		var out []dumpedCode
		for _, d := range model {
			if d.lo < hi && lo < d.hi {
				out = append(out, d)
			}
		}
		return out
	}
	for step := range 20000 {
		lo := r.Uint64N(1 << 20)
		hi := lo + 1 + r.Uint64N(64)
		if r.IntN(3) == 0 { // sometimes a wide range, over many
			hi = lo + r.Uint64N(4096) + 1
		}
		want := overlapping(lo, hi)
		got := l.remove(lo, hi)
		if !slices.EqualFunc(got, want, sameRange) {
			t.Fatalf("step %d: remove [%#x, %#x): %d ranges, want %d", step, lo, hi, len(got), len(want))
		}
		model = slices.DeleteFunc(model, func(d dumpedCode) bool { return d.lo < hi && lo < d.hi })
		if r.IntN(4) != 0 {
			d := dumpedCode{lo: lo, hi: hi, bias: uint64(step)}
			l.insert(d)
			i, _ := slices.BinarySearchFunc(model, lo, func(d dumpedCode, a uint64) int {
				switch {
				case d.lo < a:
					return -1
				case d.lo > a:
					return 1
				}
				return 0
			})
			model = slices.Insert(model, i, d)
		}
		pc := r.Uint64N(1 << 20)
		var want1 dumpedCode
		found := false
		for _, d := range model {
			if d.lo <= pc && pc < d.hi {
				want1, found = d, true
			}
		}
		if got1 := l.find(pc); (got1 != nil) != found || found && !sameRange(*got1, want1) {
			t.Fatalf("step %d: find %#x: %+v, want %+v %v", step, pc, got1, want1, found)
		}
	}
	n := 0
	for _, ch := range l.chunks {
		if len(ch) == 0 || len(ch) > 2*dumpedChunk {
			t.Errorf("a chunk of %d ranges", len(ch))
		}
		n += len(ch)
	}
	if n != len(model) {
		t.Errorf("%d ranges held, want %d", n, len(model))
	}
}

// sameRange reports whether two ranges are the same range, as given.
func sameRange(a, b dumpedCode) bool { return a.lo == b.lo && a.hi == b.hi && a.bias == b.bias }

// TestJITCode: code given by its instructions alone is walked by the frames worked out from
// them, the first time a walk needs it; code they do not tell is walked as before.
func TestJITCode(t *testing.T) {
	pid := uint32(os.Getpid())
	const code, other, ret = 0x10000000, 0x10001000, 0x30000005
	tramp, _ := hex.DecodeString("4883ec08ffd14883c408c3") // sub $8,%rsp; call *%rcx; add $8,%rsp; ret
	untold, _ := hex.DecodeString("4883ec08ffd1c3")        // sub $8,%rsp; call *%rcx; ret: not at its return address
	u := New(Config{})
	defer u.Close()
	u.Prepare(pid)
	u.AddJITCode(pid, code, tramp)
	u.AddJITCode(pid, other, untold)
	// With its allowance spent, the process's code waits: walked by its frame pointer.
	u.mu.Lock()
	u.procs[pid].analyzeLeft, u.procs[pid].analyzeAt = 0, time.Now().Add(time.Hour)
	u.mu.Unlock()
	if got := walkFrom(u, pid, code+6, ret); len(got) != 1 {
		t.Errorf("the allowance spent: %#x, want the leaf alone", got)
	}
	u.mu.Lock()
	u.procs[pid].analyzeAt = time.Time{} // long ago: the allowance is full again
	u.mu.Unlock()
	if got := u.TableBytes(); got != 2*pendingBytes {
		t.Errorf("before a walk: %d bytes held, want %d for two ranges whose instructions are kept", got, 2*pendingBytes)
	}
	if got, want := walkFrom(u, pid, code+6, ret), []uint64{code + 6, ret}; !slices.Equal(got, want) {
		t.Errorf("through the trampoline: %#x, want %#x", got, want)
	}
	if got := walkFrom(u, pid, other+4, ret); len(got) != 1 {
		t.Errorf("code its instructions do not tell, frame pointer 0: %#x, want the leaf alone", got)
	}
	rows, _ := codeRows(tramp, code)
	if got, want := u.TableBytes(), cfi.NewTable(rows).Bytes(); got != want {
		t.Errorf("after the walks: %d bytes held, want the trampoline's rows' %d alone", got, want)
	}
}

// TestJITCodeBound: a process's code kept for its instructions takes maxPendingCode at most;
// past it, code is walked as before, with one warning.
func TestJITCodeBound(t *testing.T) {
	pid := uint32(os.Getpid())
	var log bytes.Buffer
	u := New(Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	defer u.Close()
	u.Prepare(pid)
	code := make([]byte, maxCodeBytes)
	n := maxPendingCode / maxCodeBytes
	for i := range uint64(n + 2) {
		u.AddJITCode(pid, 0x10000000+i*maxCodeBytes, code)
	}
	u.mu.Lock()
	kept, pending := 0, u.procs[pid].pendingCode
	for _, ch := range u.procs[pid].dumped.chunks {
		kept += len(ch)
	}
	u.mu.Unlock()
	if kept != n || pending != maxPendingCode {
		t.Errorf("%d ranges kept, %d bytes of instructions; want %d, %d", kept, pending, n, maxPendingCode)
	}
	if c := bytes.Count(log.Bytes(), []byte("level=WARN")); c != 1 {
		t.Errorf("%d warnings, want 1:\n%s", c, log.Bytes())
	}
}

// TestJITCodeBoundAll: the instructions kept for all processes together take
// Config.MaxTableBytes at most (the symbol map may have let go of them); for the words of the
// walk by frame pointers, what is past it is told at Info, not warned about.
func TestJITCodeBoundAll(t *testing.T) {
	var log bytes.Buffer
	const bound = 4 * maxCodeBytes
	u := New(Config{ReturnSlotsOnly: true, MaxTableBytes: bound, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	defer u.Close()
	code := make([]byte, maxCodeBytes)
	for pid := uint32(1 << 30); pid < 1<<30+3; pid++ { // pids no process has
		u.Follow(pid)
		for i := range uint64(3) {
			u.AddJITCode(pid, 0x10000000+i*maxCodeBytes, code)
		}
	}
	u.mu.Lock()
	pending := u.pendingCode
	u.mu.Unlock()
	if pending != bound {
		t.Errorf("%d bytes of instructions kept, want %d", pending, bound)
	}
	if c := bytes.Count(log.Bytes(), []byte("level=INFO")); c != 2 || bytes.Contains(log.Bytes(), []byte("level=WARN")) {
		t.Errorf("want one line at Info for each process refused, none at Warn:\n%s", log.Bytes())
	}
	u.Forget(1 << 30)
	u.mu.Lock()
	pending = u.pendingCode
	u.mu.Unlock()
	if pending != bound-3*maxCodeBytes {
		t.Errorf("after a process was forgotten: %d bytes of instructions kept, want %d", pending, bound-3*maxCodeBytes)
	}
}

// TestKernelCode: the vdso is the kernel's code; memory a JIT named, the heap and anonymous
// memory are not, and their undescribed code may be described later.
func TestKernelCode(t *testing.T) {
	for path, want := range map[string]bool{"[vdso]": true, "[vsyscall]": true, "[anon:jit]": false, "[anon:v8]": false, "[heap]": false, "": false} {
		if got := kernelCode(path); got != want {
			t.Errorf("%q: %v, want %v", path, got, want)
		}
	}
}

// TestUnwinderWaits: a walk says it stopped where frame information may yet come, in JIT
// code nothing describes yet, in code whose instructions wait for the allowance, in a file
// being read, and Ready says when it came; not in the vdso, which nothing will describe.
func TestUnwinderWaits(t *testing.T) {
	pid := uint32(os.Getpid())
	code := testenv.JITMemory(t, 4096)
	const ret, sp = 0x30000005, 0x7ffd00001000
	stack := binary.LittleEndian.AppendUint64(make([]byte, 8), ret)
	stack = append(stack, make([]byte, 64)...)
	u := New(Config{})
	defer u.Close()
	u.Prepare(pid)

	got, stop := u.Unwind(pid, Regs{IP: code + 6, SP: sp}, stack, 16, nil)
	if len(got) != 1 || !stop.Wait || stop.N != 0 || stop.Regs.IP != code+6 {
		t.Fatalf("JIT code nothing describes yet: %#x, %+v; want the leaf and a stop there", got, stop)
	}
	if u.Ready(pid, stop) {
		t.Error("ready before its frame information came")
	}
	if err := u.AddJITFrames(pid, code, trampolineSize, trampoline(t), code+trampolineFramesAt); err != nil {
		t.Fatal(err)
	}
	if !u.Ready(pid, stop) {
		t.Error("not ready once its frame information came")
	}
	if got, stop := u.Unwind(pid, stop.Regs, stack, 16, got[:stop.N]); !slices.Equal(got, []uint64{code + 6, ret}) || stop.Wait {
		t.Errorf("walked on: %#x, %+v; want %#x through the trampoline", got, stop, []uint64{code + 6, ret})
	}

	// Instructions that wait for the process's allowance.
	u.RemoveJITFrames(pid, code)
	tramp, _ := hex.DecodeString("4883ec08ffd14883c408c3")
	u.AddJITCode(pid, code, tramp)
	u.mu.Lock()
	u.procs[pid].analyzeLeft, u.procs[pid].analyzeAt = 0, time.Now().Add(time.Hour)
	u.mu.Unlock()
	if _, stop := u.Unwind(pid, Regs{IP: code + 6, SP: sp}, stack, 16, nil); !stop.Wait || u.Ready(pid, stop) {
		t.Errorf("instructions waiting for the allowance: %+v", stop)
	} else {
		u.mu.Lock()
		u.procs[pid].analyzeAt = time.Time{}
		u.mu.Unlock()
		if !u.Ready(pid, stop) {
			t.Error("the allowance full again: not ready")
		}
	}

	maps, _ := procfs.ReadMaps(pid)
	for _, m := range maps {
		if m.Path == "[vdso]" {
			if _, stop := u.Unwind(pid, Regs{IP: m.Start + 16, SP: sp}, stack, 16, nil); stop.Wait {
				t.Errorf("the vdso: %+v, want no stop", stop)
			}
		}
	}

	t.Run("file", func(t *testing.T) {
		testenv.Requires(t, testenv.Root)
		other, inLibc := startSleep(t)
		u := New(Config{})
		defer u.Close()
		_, stop := u.Unwind(other, Regs{IP: inLibc, SP: sp}, stack, 16, nil)
		if !stop.Wait {
			t.Fatalf("a file being read: %+v, want a stop", stop)
		}
		for deadline := time.Now().Add(10 * time.Second); !u.Ready(other, stop); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("libc's frame information not read in 10 s")
			}
		}
		if _, stop := u.Unwind(other, Regs{IP: inLibc, SP: sp}, stack, 16, nil); stop.Wait {
			t.Errorf("the file read: %+v, want no stop", stop)
		}
	})
}

// BenchmarkAddJITCode is what the daemon's application of a JIT's code load costs the
// unwinder it hands the code to (by frame pointers, for the words at the stack pointer;
// with --unwind dwarf, for the walks): 100 000 functions of 256 bytes loaded, then each
// replaced once (a JIT that recompiles into the memory it freed), in ascending addresses
// (as a JIT's code allocator mostly hands them out) or in no order.
func BenchmarkAddJITCode(b *testing.B) {
	const n = 100000
	code := make([]byte, 256)
	for _, order := range []string{"ascending", "shuffled"} {
		b.Run(order, func(b *testing.B) {
			addrs := make([]uint64, n)
			for i := range addrs {
				addrs[i] = 0x10000000 + uint64(i)*uint64(len(code))
			}
			if order == "shuffled" {
				rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
			}
			for i := 0; i < b.N; i++ {
				u := New(Config{ReturnSlotsOnly: true})
				u.Follow(1 << 30)
				for range 2 {
					for _, a := range addrs {
						u.AddJITCode(1<<30, a, code)
					}
				}
				u.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*n), "ns/load")
		})
	}
}
