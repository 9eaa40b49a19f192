package profileio

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
)

// Section kinds of the capture format (docs/capture-format.md).
const (
	secMeta       uint32 = 1
	secProcess    uint32 = 2
	secCodeObject uint32 = 3
	secUnload     uint32 = 4
	secSamples    uint32 = 5
	secUnmapped   uint32 = 6
	secEnd        uint32 = 7
	secUnnamed    uint32 = 8
	secNative     uint32 = 9
	secStacks     uint32 = 10
	secProcInfo   uint32 = 11
	secInlined    uint32 = 12
	secLines      uint32 = 13
)

// Keys of a process_info section's attributes (a process section with attributes). Readers
// skip keys they do not know.
const (
	procInfoExecutable  = "executable"
	procInfoCommandLine = "command_line" // the arguments, NUL-separated
	procInfoCgroup      = "cgroup"
	procInfoContainerID = "container_id"
	procInfoServiceName = "service_name"
)

// joinCommandLine is args NUL-separated, cut to MaxCommandLineBytes.
func joinCommandLine(args []string) string {
	s := strings.Join(args, "\x00")
	return s[:min(len(s), MaxCommandLineBytes)]
}

// splitCommandLine undoes joinCommandLine.
func splitCommandLine(s string) []string {
	return strings.Split(s[:min(len(s), MaxCommandLineBytes)], "\x00")
}

const (
	captureHeaderBytes  = 16       // magic, version, flags
	sectionHeaderBytes  = 12       // kind, payload length, CRC-32C
	maxSectionBytes     = 64 << 20 // largest payload a reader accepts
	maxSampleBatchBytes = 4 << 20  // the writer splits sample batches at about this size
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sectionCRC is the CRC-32C of the kind, the length and the payload.
func sectionCRC(kind, length uint32, payload []byte) uint32 {
	var h [8]byte
	binary.LittleEndian.PutUint32(h[0:], kind)
	binary.LittleEndian.PutUint32(h[4:], length)
	return crc32.Update(crc32.Update(0, castagnoli, h[:]), castagnoli, payload)
}

// payload encoding helpers: unsigned and zigzag varints, length-prefixed strings.

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// sectionNames is a section's table of names (functions, mappings, thread names): each name
// once, cut to MaxFunctionNameBytes, referred to by a 1-based index; 0 is the empty name.
type sectionNames struct {
	index map[string]uint64
	names []string
}

// id returns name's index, adding it.
func (t *sectionNames) id(name string) uint64 {
	name = cutName(name)
	if name == "" {
		return 0
	}
	if i, ok := t.index[name]; ok {
		return i
	}
	if t.index == nil {
		t.index = map[string]uint64{}
	}
	t.names = append(t.names, name)
	t.index[name] = uint64(len(t.names))
	return uint64(len(t.names))
}

// appendTo appends the table: a uvarint count, then the names.
func (t *sectionNames) appendTo(b []byte) []byte {
	b = appendUvarint(b, uint64(len(t.names)))
	for _, name := range t.names {
		b = appendString(b, name)
	}
	return b
}

// finishListed writes a section of n entries, body, that refer to names: the table, n, then
// body.
func (cw *CaptureWriter) finishListed(kind uint32, names *sectionNames, n int, body []byte) error {
	b := names.appendTo(cw.begin())
	b = appendUvarint(b, uint64(n))
	return cw.finish(kind, append(b, body...))
}

// name reads an index into names (readSectionNames) and returns its name.
func (d *payloadDecoder) name(names []string) string {
	i := d.uvarint()
	if d.err == nil && i >= uint64(len(names)) {
		d.fail("string %d of %d", i, len(names)-1)
	}
	if d.err != nil {
		return ""
	}
	return names[i]
}

// readSectionNames reads a table appendTo wrote: the names by index, "" at 0.
func readSectionNames(d *payloadDecoder) []string {
	n := d.count(1)
	names := make([]string, 1, n+1)
	for i := 0; i < n && d.err == nil; i++ {
		names = append(names, cutName(d.string()))
	}
	return names
}
