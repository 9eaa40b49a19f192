package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
)

// TestWriteOutputs: a JIT function whose name LLVM's text format cannot hold (a
// perf map's "#…") is left out of the text profile alone, and said so; the ext-binary
// profile and the capture keep it, and the text profile holds the other function. Once
// the conversion's time for repairs has passed, the profiles are written unrepaired.
func TestWriteOutputs(t *testing.T) {
	object := func(id profileio.ObjectID, name string, addr uint64) *profileio.CaptureObject {
		return &profileio.CaptureObject{ID: id, Pid: 7, Object: codeobj.Object{Name: name, Addr: addr, Size: 3,
			Code:  []byte{0x31, 0xc0, 0xc3}, // xor eax, eax; ret
			Lines: []codeobj.LineEntry{{Addr: addr, File: "jit.js", Line: 1}}},
			Samples: []profileio.OffsetCount{{Offset: 0, Count: 40}, {Offset: 2, Count: 10}}}
	}
	c := &profileio.Capture{Version: profileio.CaptureVersion, Meta: profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999},
		Objects: []*profileio.CaptureObject{object(0, "#odd", 0x1000), object(1, "plain", 0x2000)}}
	dir := t.TempDir()
	owner := outfile.Owner{UID: os.Geteuid(), GID: os.Getegid()}
	out, err := writeOutputs(context.Background(), dir, "jit-7", owner, []Format{FormatLLVMText, FormatLLVMExtBinary, FormatCapture}, c, profgen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.paths) != 3 {
		t.Errorf("paths %v, want all three formats", out.paths)
	}
	if left := out.leftOut[FormatLLVMText]; left.Functions != 1 || left.Least != "#odd" {
		t.Errorf("text left out %+v, want #odd", left)
	}
	if left, ok := out.leftOut[FormatLLVMExtBinary]; ok {
		t.Errorf("ext-binary left out %+v, want nothing", left)
	}
	names := func(f Format) map[string]bool {
		file, err := os.Open(filepath.Join(dir, "jit-7"+extension[f]))
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		p, err := profileio.ReadProfile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for name := range p.Functions {
			m[name] = true
		}
		return m
	}
	if got := names(FormatLLVMText); len(got) != 1 || !got["plain"] {
		t.Errorf("text profile of %v, want plain alone", got)
	}
	if got := names(FormatLLVMExtBinary); len(got) != 2 || !got["#odd"] {
		t.Errorf("ext-binary profile of %v, want #odd and plain", got)
	}
	if out.llvm.Reestimated != 2 {
		t.Errorf("conversion %+v, want both functions repaired", out.llvm)
	}

	// Past the conversion's time for repairs, the profiles are written with raw samples.
	out, err = writeOutputs(context.Background(), dir, "jit-7", owner, []Format{FormatLLVMExtBinary}, c, profgen.Options{RepairBy: time.Now()})
	if err != nil || len(out.paths) != 1 || out.llvm.RawLate != 2 || out.llvm.Reestimated != 0 {
		t.Errorf("past RepairBy: %v, paths %v, conversion %+v; want the profile written, both functions raw", err, out.paths, out.llvm)
	}
}
