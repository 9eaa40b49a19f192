package jitmap

import (
	"encoding/binary"
	"errors"
	"testing"
)

// v5LineHeader builds a DWARF 5 line table header with one path form (DW_FORM_string) for
// directories and files and the given counts as ULEB128, followed by body bytes of filler.
func v5LineHeader(dirs, files []byte, filler int) []byte {
	var h []byte
	h = append(h, 1, 1, 1, 0xfb, 14, 1) // min_inst, max_ops, default_is_stmt, line_base, line_range, opcode_base 1
	h = append(h, 1, 1, 0x08)           // one directory form: DW_LNCT_path, DW_FORM_string
	h = append(h, dirs...)
	h = append(h, 1, 1, 0x08) // one file form
	h = append(h, files...)
	for i := 0; i < filler; i++ {
		h = append(h, 'a')
	}
	unit := binary.LittleEndian.AppendUint16(nil, 5)
	unit = append(unit, 8, 0)
	unit = binary.LittleEndian.AppendUint32(unit, uint32(len(h)))
	unit = append(unit, h...)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(unit))), unit...)
}

func TestCheckLineHeader(t *testing.T) {
	good := v5LineHeader([]byte{1, '/', 0}, []byte{2, 'a', 0, 'b', 0}, 0)
	if err := checkLineHeader(good, 0); err != nil {
		t.Fatalf("a good header: %v", err)
	}
	// 2^40 directories claimed in a header of a few bytes: debug/dwarf would allocate them all.
	huge := v5LineHeader([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, []byte{0}, 16)
	if err := checkLineHeader(huge, 0); !errors.Is(err, errLineHeader) {
		t.Fatalf("2^40 directories: error %v, want errLineHeader", err)
	}
	hugeFiles := v5LineHeader([]byte{0}, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 16)
	if err := checkLineHeader(hugeFiles, 0); !errors.Is(err, errLineHeader) {
		t.Fatalf("2^32 files: error %v, want errLineHeader", err)
	}
	if err := checkLineHeader(good[:len(good)-3], 0); !errors.Is(err, errLineHeader) {
		t.Fatalf("cut header: error %v, want errLineHeader", err)
	}
	if err := checkLineHeader(good, uint64(len(good))); !errors.Is(err, errLineHeader) {
		t.Fatalf("offset past the end: error %v, want errLineHeader", err)
	}
}
