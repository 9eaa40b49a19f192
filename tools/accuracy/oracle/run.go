package oracle

import (
	"context"
	"fmt"
	"os"

	"github.com/profd/profd/tools/accuracy/callgrind"
)

// Load joins a finished recording's callgrind file and jitdump.
func Load(rec *Recording, opts JoinOptions) (*Result, error) {
	f, err := os.Open(rec.Callgrind)
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	defer f.Close()
	prof, err := callgrind.Parse(f, callgrind.Options{})
	if err != nil {
		return nil, fmt.Errorf("oracle: %s: %w", rec.Callgrind, err)
	}
	objs, err := ReadJitdump(rec.Jitdump, uint32(rec.Pid))
	if err != nil {
		return nil, err
	}
	return Join(prof, objs, opts)
}

// Run records c and joins what it wrote: the exact profile of one run.
func Run(ctx context.Context, c RecordOptions, opts JoinOptions) (*Result, error) {
	rec, err := Record(ctx, c)
	if err != nil {
		return nil, err
	}
	return Load(rec, opts)
}
