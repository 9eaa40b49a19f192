package sampler

import (
	"encoding/binary"
	"fmt"
)

// decodeStream decodes back-to-back perf records (a ring's contents laid out flat). It stops
// at the first record that does not fit and reports its byte offset; what came before it is
// kept.
func (a *aggregate) decodeStream(buf []byte) error {
	ne := binary.NativeEndian
	for off := 0; off < len(buf); {
		if len(buf)-off < recordHeaderBytes {
			return fmt.Errorf("sampler: record at byte %d: %w: %d bytes left, header needs %d", off, ErrBadRecord, len(buf)-off, recordHeaderBytes)
		}
		typ := ne.Uint32(buf[off:])
		misc := ne.Uint16(buf[off+4:])
		size := int(ne.Uint16(buf[off+6:]))
		if size < recordHeaderBytes || size > len(buf)-off {
			return fmt.Errorf("sampler: record at byte %d: %w: size %d with %d bytes left", off, ErrBadRecord, size, len(buf)-off)
		}
		if err := a.record(typ, misc, buf[off+recordHeaderBytes:off+size]); err != nil {
			return fmt.Errorf("sampler: record at byte %d: %w", off, err)
		}
		off += size
	}
	return nil
}
