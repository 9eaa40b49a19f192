package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ulikunitz/xz"
)

// Fedora, RHEL and the distributions built like them strip their programs and libraries to
// .dynsym, the functions other files call, and keep the others' symbols in .gnu_debugdata
// ("MiniDebugInfo", as GDB names it): an ELF file of a .symtab alone (the functions .dynsym
// lacks), xz-compressed. Without it, a sample in a static function of such a file is named
// by no symbol; perf reads it too.
//
// The xz container (its file format specification, 1.0.4) is checked before it is decoded,
// since the decoder allocates the dictionary each block's header asks for, up to 4 GiB: a
// stream header (12 bytes: magic, flags, CRC32), blocks, an index and a stream footer
// (12 bytes: CRC32, the index's size in 4-byte units less one, flags, magic). The index
// lists each block's unpadded size (its header, data and check; the block is padded to a
// multiple of 4) and uncompressed size, so every block's header, and its filters'
// dictionary sizes, can be read before anything is decoded.
const (
	xzHeaderBytes  = 12
	xzFooterBytes  = 12
	xzFilterLZMA2  = 0x21
	maxXZDictBytes = 64 << 20 // xz -9's dictionary; MiniDebugInfo is made with far less
	maxXZBlocks    = 1 << 16
)

var (
	xzMagic       = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	xzFooterMagic = []byte{'Y', 'Z'}
	errXZ         = errors.New("elfsym: .gnu_debugdata: not an xz stream profd decodes")
)

// miniDebugInfo opens the ELF file in ef's .gnu_debugdata, decompressed to at most limit
// bytes: nil and no error when ef has none.
func (ef *elfFile) miniDebugInfo(limit int64) (*elfFile, error) {
	s := ef.f.Section(".gnu_debugdata")
	if s == nil || s.Type != elf.SHT_PROGBITS {
		return nil, nil
	}
	packed, err := ef.section(s, limit)
	if err != nil {
		return nil, err
	}
	data, err := unxz(packed, limit)
	if err != nil {
		return nil, err
	}
	inner, err := openELF(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("elfsym: .gnu_debugdata: %w", err)
	}
	return inner, nil
}

// unxz decodes one xz stream, refusing one that would take more than limit bytes, a
// dictionary over maxXZDictBytes, or more than maxXZBlocks blocks.
func unxz(packed []byte, limit int64) ([]byte, error) {
	size, err := checkXZ(packed, limit)
	if err != nil {
		return nil, err
	}
	r, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(packed))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errXZ, err)
	}
	out := make([]byte, 0, size)
	buf := bytes.NewBuffer(out)
	if _, err := io.Copy(buf, io.LimitReader(r, size+1)); err != nil {
		return nil, fmt.Errorf("%w: %w", errXZ, err)
	}
	if int64(buf.Len()) != size {
		return nil, fmt.Errorf("%w: %d bytes decoded, its index says %d", errXZ, buf.Len(), size)
	}
	return buf.Bytes(), nil
}

// checkXZ reads the container of the xz stream b: its size decoded, or an error when it is
// not one stream of blocks whose dictionaries are at most maxXZDictBytes, or would decode
// to more than limit bytes.
func checkXZ(b []byte, limit int64) (int64, error) {
	if len(b) < xzHeaderBytes+xzFooterBytes || !bytes.Equal(b[:6], xzMagic) ||
		!bytes.Equal(b[len(b)-2:], xzFooterMagic) {
		return 0, errXZ
	}
	footer := b[len(b)-xzFooterBytes:]
	indexSize := (uint64(binary.LittleEndian.Uint32(footer[4:])) + 1) * 4
	if indexSize > uint64(len(b)-xzHeaderBytes-xzFooterBytes) {
		return 0, fmt.Errorf("%w: its index is larger than the stream", errXZ)
	}
	indexAt := uint64(len(b)-xzFooterBytes) - indexSize
	index := b[indexAt : len(b)-xzFooterBytes]
	if index[0] != 0 {
		return 0, fmt.Errorf("%w: no index where its footer says", errXZ)
	}
	p := index[1:]
	records, ok := xzVarint(&p)
	if !ok || records > maxXZBlocks {
		return 0, fmt.Errorf("%w: an index of %d blocks", errXZ, records)
	}
	var total uint64
	at := uint64(xzHeaderBytes)
	for range records {
		unpadded, ok1 := xzVarint(&p)
		uncompressed, ok2 := xzVarint(&p)
		if !ok1 || !ok2 || unpadded == 0 || unpadded > indexAt-at {
			return 0, fmt.Errorf("%w: a block outside the stream", errXZ)
		}
		if uncompressed > uint64(limit)-total {
			return 0, fmt.Errorf("%w: more than %d bytes decoded", errXZ, limit)
		}
		total += uncompressed
		if err := checkXZBlock(b[at : at+unpadded]); err != nil {
			return 0, err
		}
		at += (unpadded + 3) &^ 3
		if at > indexAt {
			return 0, fmt.Errorf("%w: a block outside the stream", errXZ)
		}
	}
	if at != indexAt {
		return 0, fmt.Errorf("%w: its blocks do not reach its index", errXZ)
	}
	return int64(total), nil
}

// checkXZBlock reads the header of the block b (its unpadded bytes): its filters, the last
// LZMA2 with a dictionary of at most maxXZDictBytes.
func checkXZBlock(b []byte) error {
	n := (int(b[0]) + 1) * 4
	if b[0] == 0 || n > len(b) {
		return fmt.Errorf("%w: a block header outside its block", errXZ)
	}
	flags := b[1]
	if flags&0x3c != 0 {
		return fmt.Errorf("%w: a block header's reserved flags set", errXZ)
	}
	p := b[2 : n-4]
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed sizes
		if present {
			if _, ok := xzVarint(&p); !ok {
				return fmt.Errorf("%w: a block header cut short", errXZ)
			}
		}
	}
	filters := int(flags&3) + 1
	for i := range filters {
		id, ok1 := xzVarint(&p)
		size, ok2 := xzVarint(&p)
		if !ok1 || !ok2 || size > uint64(len(p)) {
			return fmt.Errorf("%w: a block header cut short", errXZ)
		}
		props := p[:size]
		p = p[size:]
		if i < filters-1 {
			continue
		}
		if id != xzFilterLZMA2 || len(props) != 1 {
			return fmt.Errorf("%w: a block whose last filter is %#x, not LZMA2", errXZ, id)
		}
		if dict := xzDictBytes(props[0]); dict > maxXZDictBytes {
			return fmt.Errorf("%w: a dictionary of %d bytes (at most %d)", errXZ, dict, maxXZDictBytes)
		}
	}
	return nil
}

// xzDictBytes is the dictionary size an LZMA2 filter's property byte gives: 2 or 3 times
// a power of two from 4 KiB, 4 GiB less one at 40; more than any for a larger code.
func xzDictBytes(code byte) uint64 {
	switch {
	case code > 40:
		return 1 << 33
	case code == 40:
		return 1<<32 - 1
	}
	return (2 | uint64(code)&1) << (code/2 + 11)
}

// xzVarint reads one of xz's integers (little-endian base 128, at most 9 bytes, no
// trailing zero byte) from the start of *p, and moves *p past it.
func xzVarint(p *[]byte) (uint64, bool) {
	var v uint64
	for i := 0; i < len(*p) && i < 9; i++ {
		c := (*p)[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, false
			}
			*p = (*p)[i+1:]
			return v, true
		}
	}
	return 0, false
}
