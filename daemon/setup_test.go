package daemon

import (
	"io"
	"log/slog"
	"sync"
	"testing"
)

// TestUnnamedRecheckConcurrent: the drain marks targets whose samples went unnamed while the
// change goroutine takes what was marked. Under the race detector (make test runs this test
// so) it fails where the two share one map outside its lock.
func TestUnnamedRecheckConcurrent(t *testing.T) {
	d := newDaemonRun(Config{All: true}, slog.New(slog.DiscardHandler), io.Discard)
	const rounds = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range rounds {
			if i%2 == 0 {
				d.checkUnnamed([]uint32{uint32(i)})
			}
		}
	}()
	for range rounds {
		d.recheckSources()
		select {
		case <-d.host.recheck:
		default:
		}
	}
	wg.Wait()
	d.recheckSources()
	if len(d.host.unnamed) != 0 {
		t.Errorf("%d targets marked unnamed are left after a check took them", len(d.host.unnamed))
	}
}
