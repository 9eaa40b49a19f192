package fifo

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/jitmap"
)

// FuzzFIFOReader sends each input through a real FIFO as one writer session and checks that
// the Server delivers exactly what decoding the bytes in one piece gives, counts every byte,
// and goes on to the next session.
func FuzzFIFOReader(f *testing.F) {
	pid := uint32(os.Getpid())
	jd := symtest.JitdumpStream(f, pid, "one", "two")
	for _, seed := range [][]byte{jd, jd[:len(jd)-5], append(append([]byte(nil), jd[:len(jd)-16]...), jd...),
		[]byte("1000 10 a\n0x2000 0x20 b c\nnot a line\n\n3000 zz bad\n4000 1 tail-without-newline")} {
		f.Add(seed)
	}
	dir, err := os.MkdirTemp("", "profd-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var mu sync.Mutex
	var got []jitmap.Event
	s, err := Start(context.Background(), Config{
		Dir:     filepath.Join(dir, "profd"),
		Handler: func(b jitmap.Batch) { mu.Lock(); got = append(got, b.Events...); mu.Unlock() },
		Decoder: jitmap.DecoderOptions{MaxRecordBytes: 4096, MaxLineBytes: 256},
	})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	if err := s.AddTarget(pid, testOwner); err != nil {
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
		for s.Stats().Sessions == before.Sessions {
			if time.Now().After(deadline) {
				t.Fatalf("the reader did not finish the session: %+v", s.Stats())
			}
			time.Sleep(50 * time.Microsecond)
		}
		after := s.Stats()
		if after.Bytes-before.Bytes != uint64(len(data)) {
			t.Fatalf("read %d bytes of %d", after.Bytes-before.Bytes, len(data))
		}
		want := runStreamAs(pid, data)
		mu.Lock()
		defer mu.Unlock()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("through the FIFO %d events, decoding in one piece %d", len(got), len(want))
		}
	})
}

// runStreamAs decodes data in one piece as a stream of pid.
func runStreamAs(pid uint32, data []byte) []jitmap.Event {
	st := jitmap.NewStream(pid, codeobj.SourceFIFO, "reference", jitmap.DecoderOptions{MaxRecordBytes: 4096, MaxLineBytes: 256})
	return append(st.Write(data).Events, st.Finish().Events...)
}
