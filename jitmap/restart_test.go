package jitmap_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

type restartShape struct {
	name string
	data []byte
}

// restartShapes are streams made of writer sessions that each end where the next begins,
// repeated to about n bytes: every restart decodes the rest of the input anew.
func restartShapes(t testing.TB, n int) []restartShape {
	t.Helper()
	var h bytes.Buffer
	if _, err := jitdumptest.NewWriter(&h, jitmap.JitdumpHeader{Pid: 7}); err != nil {
		t.Fatal(err)
	}
	header := h.Bytes()
	badHeader := binary.LittleEndian.AppendUint32(append([]byte(nil), header[:8]...), 0) // total_size 0
	// A record header that claims as much as a record may hold.
	hugeRecord := binary.LittleEndian.AppendUint32(nil, jitmap.JitdumpCodeLoad)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, jitmap.DefaultMaxRecordBytes)
	hugeRecord = binary.LittleEndian.AppendUint64(hugeRecord, 1)
	repeat := func(prefix []byte, unit ...[]byte) []byte {
		u := bytes.Join(unit, nil)
		return append(append([]byte(nil), prefix...), bytes.Repeat(u, n/len(u))...)
	}
	return []restartShape{
		{"back-to-back headers", repeat(nil, header)},
		{"headers in a record that claims 16 MiB", repeat(append(append([]byte(nil), header...), hugeRecord...), header)},
		{"sessions each cut short by the next inside a record that claims 16 MiB", repeat(nil, header, hugeRecord)},
		{"jitdump and perf-map text in turn", repeat(nil, header, []byte("1000 10 a_function_name\n"))},
		{"perf-map lines cut short by headers", repeat(nil, header, []byte("1000 10 a_function_name_without_its_newline"))},
		{"headers too short to be read", repeat(nil, badHeader)},
	}
}

// allocPerByte decodes data with a Stream, in reads of at most read bytes, and returns the
// bytes it allocated per byte of data.
func allocPerByte(data []byte, read int) float64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st := jitmap.NewStream(7, codeobj.SourceFIFO, "test", jitmap.DecoderOptions{})
	for p := data; len(p) > 0; {
		k := min(read, len(p))
		st.Write(p[:k])
		p = p[k:]
	}
	st.Finish()
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(len(data))
}

// TestStreamRestartsLinear: however many sessions a stream holds back to back, decoding
// costs about the same per byte; each restart does not decode a copy of the rest of the
// input (which made 64 KiB of back-to-back headers cost 50 MB of copying, and a record
// that claims 16 MiB, holding headers, minutes of CPU).
func TestStreamRestartsLinear(t *testing.T) {
	const n = 64 << 10
	small, large := restartShapes(t, n), restartShapes(t, 4*n)
	for i, shape := range small {
		for _, read := range []int{64 << 10, 4 * n} {
			// A session costs a Decoder and an error, some 700 bytes, for 12 bytes of input
			// at the least; copying the rest at each restart costs n/80 per byte, 800 here.
			const bound = 100
			perByte := allocPerByte(shape.data, read)
			if perByte > bound {
				t.Errorf("%s in reads of %d: %.0f bytes allocated per byte of %d, want at most %d", shape.name, read, perByte, len(shape.data), bound)
				continue // four times the input would cost sixteen times as much
			}
			// Four times the input, at most about four times the cost (not sixteen).
			more := allocPerByte(large[i].data, read)
			if more > 1.5*perByte+1 {
				t.Errorf("%s in reads of %d: %.1f bytes allocated per byte of %d, %.1f per byte of %d", shape.name, read, perByte, len(shape.data), more, len(large[i].data))
			}
		}
	}
}
