package sampler

import (
	"errors"
	"fmt"
	"os"
)

// New chooses the event (see EventChoice) and opens the back end; sampling begins at Start.
// With BackendAuto it uses BPF where the program loads and says why when it cannot.
func New(cfg Config) (Sampler, error) {
	cfg = cfg.withDefaults()
	if cfg.FreqHz > 0 && cfg.Period > 0 {
		return nil, errors.New("sampler: config: frequency and period are exclusive")
	}
	choice, spec, err := chooseEvent(cfg, cfg.Logger)
	if err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case BackendBPF:
		return orNil(newBPFSampler(cfg, choice, spec))
	case BackendRing:
		return orNil(newRingSampler(cfg, choice, spec))
	case BackendAuto:
		s, err := newBPFSampler(cfg, choice, spec)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
			// The library's own hint (a low RLIMIT_MEMLOCK) would mislead: loading BPF
			// programs takes root's rights (CAP_BPF and CAP_PERFMON).
			cfg.Logger.Warn("sampler: BPF back end unavailable to a user other than root (it needs CAP_BPF and CAP_PERFMON), reading perf ring buffers instead",
				"uid", os.Geteuid())
			return orNil(newRingSampler(cfg, choice, spec))
		}
		cfg.Logger.Warn("sampler: BPF back end unavailable, reading perf ring buffers instead", "reason", err)
		return orNil(newRingSampler(cfg, choice, spec))
	default:
		return nil, fmt.Errorf("sampler: backend %q: want %q or %q", cfg.Backend, BackendBPF, BackendRing)
	}
}

// orNil returns s as a Sampler, or a nil Sampler (not one holding a nil pointer) with err.
func orNil[S interface {
	Sampler
	comparable
}](s S, err error) (Sampler, error) {
	var zero S
	if err != nil || s == zero {
		return nil, err
	}
	return s, nil
}

// allBut is the tgid whose samples AllProcesses leaves out (profd's own), 0 without it.
func (c Config) allBut() uint32 {
	if c.AllProcesses {
		return uint32(os.Getpid())
	}
	return 0
}
