package fifo

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/jitmap"
)

// FuzzFIFOReader sends each input through a real FIFO as one writer session and checks that
// the Server delivers exactly what decoding the bytes in one piece gives, counts every byte,
// and goes on to the next session.
func FuzzFIFOReader(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	dir, err := os.MkdirTemp("", "profd-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var mu sync.Mutex
	var got []Event
	s, err := Start(context.Background(), Config{
		Dir:     filepath.Join(dir, "profd"),
		Handler: func(ev Event) { mu.Lock(); got = append(got, ev); mu.Unlock() },
		Decoder: jitmap.DecoderOptions{MaxRecordBytes: 4096, MaxLineBytes: 256},
	})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid); err != nil {
		f.Fatal(err)
	}
	path := s.FIFOPath(pid)
	f.Fuzz(func(t *testing.T, data []byte) {
		mu.Lock()
		got = nil
		mu.Unlock()
		before := s.Stats()
		w := openWriter(t, path)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		w.Close()
		deadline := time.Now().Add(10 * time.Second)
		for s.Stats().Streams == before.Streams {
			if time.Now().After(deadline) {
				t.Fatalf("the reader did not finish the session: %+v", s.Stats())
			}
			time.Sleep(50 * time.Microsecond)
		}
		after := s.Stats()
		if after.Bytes-before.Bytes != uint64(len(data)) {
			t.Fatalf("read %d bytes of %d", after.Bytes-before.Bytes, len(data))
		}
		want, _ := runStreamAs(pid, data)
		mu.Lock()
		defer mu.Unlock()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("through the FIFO %d events, decoding in one piece %d", len(got), len(want))
		}
	})
}

// runStreamAs decodes data in one piece as a stream of pid.
func runStreamAs(pid uint32, data []byte) ([]Event, Stats) {
	var got []Event
	s := newTestSink(func(ev Event) { got = append(got, ev) })
	st := newStream(pid, jitmap.SourceFIFO, "reference", s)
	st.write(data)
	st.finish()
	return got, s.stats.snapshot()
}
