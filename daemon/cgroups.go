package daemon

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/profd/profd/sampler"
)

// kernelCgroups keeps the cgroups whose processes the sampler counts from their first
// sample (sampler.Config.AllCgroups) those the watcher's filter names now: each --cgroup
// directory as it is (a service restarted makes its cgroup again, with a new id), and the
// cgroup of each container a process of was seen in. Safe for concurrent use.
type kernelCgroups struct {
	mu                   sync.Mutex
	last                 []uint64
	warnedFull, warnedOf bool // of more cgroups than the sampler takes, of its error
}

// set hands ids to smp when they changed since the last call; past
// sampler.MaxAllCgroups, the rest are left to the watcher (one warning).
func (k *kernelCgroups) set(smp sampler.Sampler, ids []uint64, log *slog.Logger) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(ids) > sampler.MaxAllCgroups {
		if !k.warnedFull {
			k.warnedFull = true
			log.Warn("profd: more cgroups than the sampler tells apart: the processes of the rest are profiled once the watcher adds them, not from their first sample",
				"cgroups", len(ids), "max", sampler.MaxAllCgroups)
		}
		ids = ids[:sampler.MaxAllCgroups]
	}
	if slices.Equal(ids, k.last) {
		return
	}
	if err := smp.SetCgroups(ids); err != nil {
		if !k.warnedOf {
			k.warnedOf = true
			log.Warn("profd: the sampler's cgroups could not be set: their processes are profiled once the watcher adds them", "err", err)
		}
		return
	}
	k.last = ids
}
