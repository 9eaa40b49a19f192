package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/symsource/files"
)

// TestPerfMapBacklogPaced: a perf map holding more lines than its target's record budget
// saves up (a JIT that ran long before profd started) is read at the budget's pace, not cut
// at it: every line is applied in the end and none is dropped, and no more are applied at
// any time than the budget allows, give or take one read.
func TestPerfMapBacklogPaced(t *testing.T) {
	const rate, burst, lines = 4000, 20000, 40000
	sleep := testenv.Sleeper(t)
	pid := uint32(sleep.Process.Pid)
	dir := t.TempDir()
	data := symtest.PerfMapLines(lines, 4096)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("perf-%d.map", pid)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	var applied atomic.Int64
	start := time.Now() // the allowance starts to grow as the target is added
	s := newSymbolStage(enrich.New(enrich.Options{}), func(b jitmap.Batch) { applied.Add(int64(len(b.Events))) }, log, rate, burst)
	s.addTarget(pid)
	ft, err := files.Start(context.Background(), files.Config{Handler: s.addPaced, Ready: s.ready, Logger: log, PerfMapDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	if err := ft.AddTarget(pid, -1); err != nil {
		t.Fatal(err)
	}
	perRead := files.DefaultReadBufferBytes/(bytes.IndexByte(data, '\n')+1) + 1 // lines of one read, at most
	for deadline := time.Now().Add(30 * time.Second); applied.Load() < lines; time.Sleep(100 * time.Millisecond) {
		// The queue may hold what was read and not yet applied: applied lags what was taken.
		if most := burst + rate*time.Since(start).Seconds() + float64(perRead); float64(applied.Load()) > most {
			t.Fatalf("%d lines applied %v after the start, want at most %.0f", applied.Load(), time.Since(start), most)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lines applied in 30 s (%d dropped)\n%s", applied.Load(), lines, s.overRate.Load(), logs)
		}
	}
	if took, least := time.Since(start), time.Duration(float64(lines-burst-perRead)/rate*float64(time.Second)); took < least {
		t.Errorf("all %d lines applied in %v, want at least %v at %d a second", lines, took, least, rate)
	}
	if n := s.overRate.Load(); n != 0 || strings.Contains(logs.String(), "faster than its budget") {
		t.Errorf("%d lines dropped over the budget\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "reading them at its pace"); n != 1 {
		t.Errorf("%d notes of the pacing, want 1\n%s", n, logs)
	}
}
