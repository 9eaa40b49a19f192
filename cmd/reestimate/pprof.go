package main

import (
	"io"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/profileio"
)

// inputLabel is the pprof sample label naming the capture a sample came from: pids of
// different hosts or runs may be the same.
const inputLabel = "input"

// pprofBatch is how many captures' profiles pprofMerger merges at once.
const pprofBatch = 64

// pprofMerger folds the pprof profiles of captures into one, every sample labelled with its
// capture, so that processes stay apart by their "pid" and "input" labels.
//
// As every process stays apart, the merged profile grows with each capture, and merging
// each capture into it would copy it once per capture. Instead the profiles are merged in
// batches, and the batches pairwise as a binary counter adds: each sample is merged about
// log2(captures/pprofBatch) times.
type pprofMerger struct {
	pending []*profile.Profile // not merged yet, fewer than pprofBatch
	levels  []level            // merged batches, the largest first
	// merged counts the samples given to profile.Merge, all calls together.
	merged int
}

// level is a profile merged from batches captures' batches.
type level struct {
	p       *profile.Profile
	batches int
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
	pm.pending = append(pm.pending, p)
	if len(pm.pending) < pprofBatch {
		return nil
	}
	b, err := pm.merge(pm.pending)
	if err != nil {
		return err
	}
	clear(pm.pending)
	pm.pending = pm.pending[:0]
	l := level{b, 1}
	for n := len(pm.levels); n > 0 && pm.levels[n-1].batches == l.batches; n = len(pm.levels) {
		top := pm.levels[n-1]
		pm.levels = pm.levels[:n-1]
		p, err := pm.merge([]*profile.Profile{top.p, l.p})
		if err != nil {
			return err
		}
		l = level{p, top.batches + l.batches}
	}
	pm.levels = append(pm.levels, l)
	return nil
}

// merge merges ps, counting their samples.
func (pm *pprofMerger) merge(ps []*profile.Profile) (*profile.Profile, error) {
	if len(ps) == 1 {
		return ps[0], nil
	}
	for _, p := range ps {
		pm.merged += len(p.Sample)
	}
	return profile.Merge(ps)
}

// result merges what is left into the one profile of every capture added.
func (pm *pprofMerger) result() (*profile.Profile, error) {
	ps := pm.pending
	for _, l := range pm.levels {
		ps = append(ps, l.p)
	}
	return pm.merge(ps)
}

func (pm *pprofMerger) write(w io.Writer) error {
	p, err := pm.result()
	if err != nil {
		return err
	}
	return p.Write(w)
}
