package profileio

import (
	"encoding/binary"
	"fmt"
)

// nextUvarint decodes one uvarint off the front of b.
func nextUvarint(b []byte) (uint64, []byte, bool) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), b[1:], true
	}
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// payloadDecoder reads the fields of one section's payload; the first error sticks.
type payloadDecoder struct {
	b   []byte
	err error
}

func (d *payloadDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format+": %w", append(args, ErrMalformed)...)
	}
}

func (d *payloadDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *payloadDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *payloadDecoder) uint32() uint32 {
	v := d.uvarint()
	if v > 0xffffffff {
		d.fail("%d exceeds 32 bits", v)
	}
	return uint32(v)
}

func (d *payloadDecoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("missing byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *payloadDecoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%d bytes wanted, %d left", n, len(d.b))
		return nil
	}
	v := make([]byte, n)
	copy(v, d.b)
	d.b = d.b[n:]
	return v
}

func (d *payloadDecoder) string() string {
	return string(d.bytes(d.uvarint()))
}

// count reads a record count and checks that records of at least minBytes each fit.
func (d *payloadDecoder) count(minBytes int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/minBytes) {
		d.fail("%d records cannot fit %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}
