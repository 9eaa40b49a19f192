package cfg

import (
	"debug/elf"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// sameDecode checks fastDecode against x86asm at code[off:]. It returns whether the fast path
// took the instruction.
func sameDecode(t testing.TB, code []byte, off int) bool {
	t.Helper()
	var fast inst
	if !fastDecode(code[off:], off, &fast) {
		return false
	}
	if b := code[off]; b == 0xC4 || b == 0xC5 || b == 0x62 {
		return true // VEX/EVEX: x86asm knows too few of them; llvm-objdump checks these (TestBuildCFGMatchesObjdump)
	}
	slow, err := decodeX86asm(code[off:], off)
	if err != nil {
		t.Fatalf("at %#x (% x): fast path took %d bytes, x86asm: %v", off, code[off:off+int(fast.size)], fast.size, err)
	}
	if fast != slow {
		end := min(off+maxInstBytes, len(code))
		t.Fatalf("at %#x (% x): fast %+v, x86asm %+v", off, code[off:end], fast, slow)
	}
	return true
}

// TestFastDecodeMatchesX86asm decodes real code, every instruction both ways: the clang-14
// kernels and a megabyte of libLLVM. The fast path must agree with x86asm wherever it decides,
// and decide for nearly all of the code.
func TestFastDecodeMatchesX86asm(t *testing.T) {
	testenv.Requires(t, testenv.Tool("clang-14"))
	var blobs [][]byte
	for _, flags := range clangFlagSets {
		for _, fn := range textFuncs(t, compileKernels(t, flags)) {
			blobs = append(blobs, fn.code)
		}
	}
	if f, err := elf.Open("/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"); err == nil {
		if text := f.Section(".text"); text != nil {
			if data, err := text.Data(); err == nil && len(data) > 1<<20 {
				blobs = append(blobs, data[:1<<20])
			}
		}
		f.Close()
	}
	total, fast := 0, 0
	for _, code := range blobs {
		for off := 0; off < len(code); {
			var in inst
			if err := decodeInst(code, off, &in); err != nil {
				off++ // libLLVM's linear sweep can land in odd padding; resynchronise
				continue
			}
			total++
			if sameDecode(t, code, off) {
				fast++
			}
			off += int(in.size)
		}
	}
	t.Logf("fast path took %d of %d instructions", fast, total)
	if fast < total*9/10 {
		t.Errorf("fast path took only %d of %d instructions", fast, total)
	}
}

// FuzzFastDecode: wherever the fast path decides, x86asm agrees on length, kind and target.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{"4889e5", "0f8400010000", "e9fbffffff", "66662e0f1f840000000000", "488b04c5f0ffffff",
		"f30f1efa", "c5fb1007", "c4e27d18442408", "62f17c4828c1", "f0480fb10a", "48b80102030405060708", "f7c701000000"} {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		if len(code) > 0 {
			sameDecode(t, code, 0)
		}
	})
}
