package cfg

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// compiledFunc is one function of a real object: its code, up to the next symbol, so the
// alignment padding after it comes along as it would in a JIT's code object.
type compiledFunc struct {
	name string
	addr uint64
	code []byte
}

// clangFlagSets are the ways the tests compile testdata/kernels.c: plain -O2, with CET's
// endbr64 and notrack jumps, with AVX2 (VEX encodings), for size, and with big alignment padding.
var clangFlagSets = [][]string{
	{"-O2"},
	{"-O2", "-fcf-protection=full"},
	{"-O2", "-mavx2", "-mfma"},
	{"-Os"},
	{"-O2", "-falign-functions=64", "-falign-loops=32"},
}

// compileKernels builds kernels.c into a shared object with clang-14 and returns its path.
func compileKernels(t testing.TB, flags []string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kernels.so")
	args := append(append([]string{}, flags...), "-fPIC", "-shared", "-nostdlib", "-o", out, "testdata/kernels.c")
	if b, err := exec.Command("clang-14", args...).CombinedOutput(); err != nil {
		t.Fatalf("clang-14 %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// textFuncs reads the function symbols of .text from an ELF file.
func textFuncs(t testing.TB, path string) []compiledFunc {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	data, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err == elf.ErrNoSymbols {
		syms, err = f.DynamicSymbols()
	}
	if err != nil {
		t.Fatal(err)
	}
	var starts []uint64
	byAddr := map[uint64]string{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value >= text.Addr && s.Value < text.Addr+text.Size {
			if _, dup := byAddr[s.Value]; !dup {
				starts = append(starts, s.Value)
			}
			byAddr[s.Value] = s.Name
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var out []compiledFunc
	for i, a := range starts {
		end := text.Addr + text.Size
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		out = append(out, compiledFunc{name: byAddr[a], addr: a, code: data[a-text.Addr : end-text.Addr]})
	}
	return out
}

// objdumpInst is one line of llvm-objdump's disassembly.
type objdumpInst struct {
	addr     uint64
	mnemonic string
	target   uint64 // direct branch target, 0 if none
}

var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$`)
var objdumpTarget = regexp.MustCompile(`^0x([0-9a-f]+)\b`)

// objdumpText disassembles .text with llvm-objdump-14, independently of x86asm.
func objdumpText(t testing.TB, path string) map[uint64]objdumpInst {
	t.Helper()
	out, err := exec.Command("llvm-objdump-14", "-d", "--no-show-raw-insn", "--section=.text", path).Output()
	if err != nil {
		t.Fatalf("llvm-objdump-14: %v", err)
	}
	insts := map[uint64]objdumpInst{}
	for _, line := range strings.Split(string(out), "\n") {
		m := objdumpLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			continue
		}
		in := objdumpInst{addr: a, mnemonic: m[2]}
		if strings.HasPrefix(in.mnemonic, "j") || strings.HasPrefix(in.mnemonic, "loop") {
			if tm := objdumpTarget.FindStringSubmatch(strings.TrimSpace(m[3])); tm != nil {
				in.target, _ = strconv.ParseUint(tm[1], 16, 64)
			}
		}
		insts[a] = in
	}
	return insts
}

func isPadding(mnemonic string) bool {
	return strings.HasPrefix(mnemonic, "nop") || mnemonic == "int3" || mnemonic == "data16" || mnemonic == "xchgw"
}

// TestBuildCFGMatchesObjdump builds the CFG of every function clang-14 makes of kernels.c, under
// several flag sets, and checks it against llvm-objdump-14's disassembly: the same instructions
// (objdump's extra ones are padding only), every direct in-function branch target is a block
// start with an edge to it, every block ends in a branch or falls into a leader, and the switch
// leaves an indirect jump.
func TestBuildCFGMatchesObjdump(t *testing.T) {
	testenv.Requires(t, testenv.Tool("clang-14"), testenv.Tool("llvm-objdump-14"))
	for _, flags := range clangFlagSets {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			so := compileKernels(t, flags)
			dis := objdumpText(t, so)
			funcs := textFuncs(t, so)
			if len(funcs) < 5 {
				t.Fatalf("found %d functions in %s, want the 5 of kernels.c", len(funcs), so)
			}
			sawEndbr, sawPadding := false, false
			for _, fn := range funcs {
				g, err := Build(fn.code, fn.addr)
				if err != nil {
					t.Fatalf("%s: %v", fn.name, err)
				}
				checkInvariants(t, g)
				checkAgainstObjdump(t, fn, g, dis)
				if dis[fn.addr].mnemonic == "endbr64" {
					sawEndbr = true
				}
				if g.Blocks[len(g.Blocks)-1].End < fn.addr+uint64(len(fn.code)) {
					sawPadding = true
				}
				if fn.name == "dispatch" && g.IndirectJumps != 1 {
					t.Errorf("dispatch: %d indirect jumps, want 1 (the jump table)", g.IndirectJumps)
				}
			}
			if strings.Contains(strings.Join(flags, " "), "cf-protection") && !sawEndbr {
				t.Errorf("no endbr64 in -fcf-protection output")
			}
			if strings.Contains(strings.Join(flags, " "), "align") && !sawPadding {
				t.Errorf("no trailing padding with -falign-functions=64")
			}
		})
	}
}

func checkAgainstObjdump(t *testing.T, fn compiledFunc, g *Graph, dis map[uint64]objdumpInst) {
	t.Helper()
	end := fn.addr + uint64(len(fn.code))
	ours := map[uint64]bool{}
	for _, b := range g.Blocks {
		for _, a := range b.Insts {
			ours[a] = true
			if _, ok := dis[a]; !ok {
				t.Errorf("%s: instruction at %#x, objdump has none", fn.name, a)
			}
		}
	}
	starts := map[uint64]int{}
	for i, b := range g.Blocks {
		starts[b.Start] = i
	}
	for a, in := range dis {
		if a < fn.addr || a >= end {
			continue
		}
		if !ours[a] && !isPadding(in.mnemonic) {
			t.Errorf("%s: objdump has %s at %#x, the CFG has no such instruction", fn.name, in.mnemonic, a)
		}
		if in.target != 0 && ours[a] && in.target >= fn.addr && in.target < end {
			to, ok := starts[in.target]
			if !ok {
				t.Errorf("%s: %s at %#x targets %#x, not a block start", fn.name, in.mnemonic, a, in.target)
				continue
			}
			from, _, _ := g.Locate(a)
			if !hasEdge(g, from, to) {
				t.Errorf("%s: no edge for %s at %#x to %#x", fn.name, in.mnemonic, a, in.target)
			}
		}
	}
	for i, b := range g.Blocks {
		last := dis[b.Insts[len(b.Insts)-1]].mnemonic
		branches := strings.HasPrefix(last, "j") || strings.HasPrefix(last, "ret") || last == "ud2" || last == "int3" || last == "hlt"
		if !branches {
			if i+1 < len(g.Blocks) && g.Blocks[i+1].Start == b.End {
				if !hasEdge(g, i, i+1) {
					t.Errorf("%s: block %#x ends in %s without an edge to the next block", fn.name, b.Start, last)
				}
			} else if !b.Exit {
				t.Errorf("%s: block %#x runs off the end but is not an exit", fn.name, b.Start)
			}
		}
		if strings.HasPrefix(last, "ret") && !b.Exit {
			t.Errorf("%s: block %#x returns but is not an exit", fn.name, b.Start)
		}
	}
}

func hasEdge(g *Graph, from, to int) bool {
	for _, e := range g.Edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}
