package main

import (
	"io"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/profileio"
)

// inputLabel is the pprof sample label naming the capture a sample came from: pids of
// different hosts or runs may be the same.
const inputLabel = "input"

// pprofMerger folds the pprof profiles of captures into one, every sample labelled with its
// capture, so that processes stay apart by their "pid" and "input" labels.
type pprofMerger struct {
	merged *profile.Profile
}

// add folds c, read from input, into the merged profile.
func (pm *pprofMerger) add(c *profileio.Capture, input string) error {
	p, err := profileio.Pprof(c)
	if err != nil {
		return err
	}
	for _, s := range p.Sample {
		if s.Label == nil {
			s.Label = map[string][]string{}
		}
		s.Label[inputLabel] = []string{input}
	}
	if pm.merged == nil {
		pm.merged = p
		return nil
	}
	merged, err := profile.Merge([]*profile.Profile{pm.merged, p})
	if err != nil {
		return err
	}
	pm.merged = merged
	return nil
}

func (pm *pprofMerger) write(w io.Writer) error { return pm.merged.Write(w) }
