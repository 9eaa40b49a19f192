package jitmap_test

import (
	"errors"
	"os"
	"testing"

	"github.com/profd/profd/jitmap"
)

// TestObjectFunctions reads the functions of lli-14's debug object: its one function, main,
// at the loaded .text's address (readelf -sW: value 0 in section 2; -SW: .text at
// 0x7fc415d66000) with its symbol's size, 1355 bytes.
func TestObjectFunctions(t *testing.T) {
	obj, err := os.ReadFile(mcjitDebugObject)
	if err != nil {
		t.Fatal(err)
	}
	funcs, err := jitmap.ObjectFunctions(obj, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) != 1 || funcs[0].Name != "main" || funcs[0].Addr != 0x7fc415d66000 || funcs[0].Size != 1355 {
		t.Fatalf("functions %+v, want main at 0x7fc415d66000, 1355 bytes", funcs)
	}
	if _, err := jitmap.ObjectFunctions(obj[:100], 0); !errors.Is(err, jitmap.ErrBadDebugObject) {
		t.Errorf("a cut object: error %v, want ErrBadDebugObject", err)
	}
}

// FuzzObjectFunctions: whatever the bytes, no panic, at most max functions, each loaded
// (non-zero address and size, not wrapping), ascending, and errors wrap ErrBadDebugObject.
func FuzzObjectFunctions(f *testing.F) {
	obj, err := os.ReadFile(mcjitDebugObject)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(obj)
	f.Add(obj[:len(obj)*3/4])
	f.Fuzz(func(t *testing.T, b []byte) {
		const max = 100
		funcs, err := jitmap.ObjectFunctions(b, max)
		if err != nil {
			if !errors.Is(err, jitmap.ErrBadDebugObject) || funcs != nil {
				t.Fatalf("error %v with %d functions", err, len(funcs))
			}
			return
		}
		if len(funcs) > max {
			t.Fatalf("%d functions, max %d", len(funcs), max)
		}
		for i, fn := range funcs {
			if fn.Addr == 0 || fn.Size == 0 || fn.Addr+fn.Size < fn.Addr || fn.Name == "" {
				t.Fatalf("function %+v", fn)
			}
			if i > 0 && fn.Addr < funcs[i-1].Addr {
				t.Fatalf("functions not sorted at %d", i)
			}
		}
	})
}
