package files

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
)

// BenchmarkLookManySubdirs: one round of looks over 10 targets that share a jitdump
// directory of 5 000 subdirectories made while they run (one per JIT process that ran
// there, a host's $HOME/.debug/jit after a while), none of them theirs.
func BenchmarkLookManySubdirs(b *testing.B) {
	root := filepath.Join(b.TempDir(), "jit")
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	ft, err := Start(context.Background(), Config{JitdumpDirs: []string{root}, Handler: func(jitmap.Batch) {},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer ft.Close()
	for range 10 {
		if err := ft.AddTarget(uint32(testenv.Sleeper(b).Process.Pid), os.Geteuid()); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 5000 {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("llvm-IR-jit-%d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	look := func() {
		ft.mu.Lock()
		for _, t := range ft.targets {
			ft.look(t)
		}
		ft.mu.Unlock()
	}
	look() // each target tries every subdirectory made since it started, once
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	for b.Loop() {
		look()
	}
	ft.mu.Lock()
	b.ReportMetric(float64(len(ft.watches)), "watches")
	ft.mu.Unlock()
}
