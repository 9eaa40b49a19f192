package jitmap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errLineHeader = errors.New("line table header")

// checkLineHeader checks, before debug/dwarf reads it, that the DWARF 5 line table header
// at off in .debug_line claims no more directories or files than its bytes can hold:
// debug/dwarf allocates the claimed number of entries up front (a 10-byte ULEB128 can claim
// 2^64). Headers of DWARF 2–4 (NUL-terminated lists) need no check. Entry forms other than
// those DWARF producers use for directories and files are refused.
func checkLineHeader(line []byte, off uint64) error {
	if off >= uint64(len(line)) {
		return fmt.Errorf("offset %#x beyond .debug_line's %d bytes: %w", off, len(line), errLineHeader)
	}
	c := &cursor{b: line[off:], base: off}
	length := uint64(c.u32())
	dwarf64 := length == 0xffffffff
	if dwarf64 {
		length = c.u64()
	}
	if c.err != nil || length > uint64(len(c.b)) {
		return c.fail("unit length")
	}
	c.b = c.b[:length]
	if c.u16() < 5 {
		return c.err
	}
	c.skip(2) // address_size, segment_selector_size
	hlen := uint64(c.u32())
	if dwarf64 {
		hlen = c.u64()
	}
	if c.err != nil || hlen > uint64(len(c.b)) {
		return c.fail("header length")
	}
	c.b = c.b[:hlen]
	c.skip(5) // minimum_instruction_length, maximum_operations_per_instruction, default_is_stmt, line_base, line_range
	opcodeBase := c.u8()
	if opcodeBase > 0 {
		c.skip(int(opcodeBase) - 1)
	}
	for _, what := range []string{"directories", "file names"} {
		forms := make([]uint64, c.u8())
		for i := range forms {
			c.uleb() // content type
			forms[i] = c.uleb()
		}
		n := c.uleb()
		if c.err != nil {
			return c.err
		}
		if n > uint64(len(c.b)) {
			return c.fail(fmt.Sprintf("%d %s in %d bytes", n, what, len(c.b)))
		}
		for ; n > 0 && c.err == nil; n-- {
			for _, f := range forms {
				c.skipForm(f, dwarf64)
			}
		}
	}
	return c.err
}

// cursor reads little-endian fields; the first failure sticks.
type cursor struct {
	b    []byte
	base uint64 // .debug_line offset of the table start, for errors
	at   uint64 // bytes consumed
	err  error
}

func (c *cursor) fail(what string) error {
	if c.err == nil {
		c.err = fmt.Errorf("table at %#x, byte %d: %s: %w", c.base, c.at, what, errLineHeader)
	}
	return c.err
}

func (c *cursor) take(n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.b) {
		c.fail("truncated")
		return nil
	}
	p := c.b[:n]
	c.b, c.at = c.b[n:], c.at+uint64(n)
	return p
}

func (c *cursor) skip(n int) { c.take(n) }

func (c *cursor) u8() uint8 {
	if p := c.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (c *cursor) u16() uint16 {
	if p := c.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (c *cursor) u32() uint32 {
	if p := c.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if p := c.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (c *cursor) uleb() uint64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Uvarint(c.b)
	switch {
	case n == 0:
		c.fail("truncated")
		return 0
	case n < 0:
		c.fail("ULEB128 number over 64 bits")
		return 0
	}
	c.take(n)
	return v
}

// skipForm skips one attribute value of a DWARF form a line table header may use.
func (c *cursor) skipForm(form uint64, dwarf64 bool) {
	offSize := 4
	if dwarf64 {
		offSize = 8
	}
	switch form {
	case 0x08: // DW_FORM_string
		for c.err == nil {
			if p := c.take(1); p == nil || p[0] == 0 {
				return
			}
		}
	case 0x0e, 0x1f: // DW_FORM_strp, DW_FORM_line_strp
		c.skip(offSize)
	case 0x0b, 0x25: // DW_FORM_data1, DW_FORM_strx1
		c.skip(1)
	case 0x05, 0x26: // DW_FORM_data2, DW_FORM_strx2
		c.skip(2)
	case 0x27: // DW_FORM_strx3
		c.skip(3)
	case 0x06, 0x28: // DW_FORM_data4, DW_FORM_strx4
		c.skip(4)
	case 0x07: // DW_FORM_data8
		c.skip(8)
	case 0x1e: // DW_FORM_data16
		c.skip(16)
	case 0x0f, 0x1a: // DW_FORM_udata, DW_FORM_strx
		c.uleb()
	case 0x09: // DW_FORM_block
		n := c.uleb()
		if n > uint64(len(c.b)) {
			c.fail("block length")
			return
		}
		c.skip(int(n))
	default:
		c.fail(fmt.Sprintf("form %#x", form))
	}
}
