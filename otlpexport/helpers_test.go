package otlpexport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/profd/profd/internal/testenv"
)

// testProfile is a profile shaped as profd writes one: samples/count and cpu-clock
// nanoseconds, JIT frames in mappings of their own, native frames with build-ids, kernel
// frames, and the labels pid, tid, comm, event. n samples spread over three processes and
// samples without a pid.
func testProfile(n int) Profile {
	const period = 1_000_000
	kernel := &profile.Mapping{ID: 1, Start: 0xffffffff81000000, Limit: 0xffffffff82000000, File: "[kernel]"}
	libc := &profile.Mapping{ID: 2, Start: 0x7f0000000000, Limit: 0x7f0000200000, File: "/usr/lib/libc.so.6", BuildID: "4f3e1bd0a9c2d5e6f7a8b9c0d1e2f3a4b5c6d7e8", HasFunctions: true}
	lli := &profile.Mapping{ID: 3, Start: 0x400000, Limit: 0x800000, File: "/usr/bin/lli-14", BuildID: "0123456789abcdef0123456789abcdef01234567", HasFunctions: true}
	jit := &profile.Mapping{ID: 4, Start: 0x7e0000000000, Limit: 0x7e0000010000, File: "[jit]"}
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu-clock", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu-clock", Unit: "nanoseconds"},
		Period:        period,
		TimeNanos:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano(),
		DurationNanos: int64(10 * time.Second),
		Mapping:       []*profile.Mapping{kernel, libc, lli, jit},
	}
	var fid, lid uint64
	loc := func(m *profile.Mapping, addr uint64, name string, line int64) *profile.Location {
		fid++
		lid++
		f := &profile.Function{ID: fid, Name: name, SystemName: name, Filename: m.File}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: lid, Mapping: m, Address: addr, Line: []profile.Line{{Function: f, Line: line}}}
		p.Location = append(p.Location, l)
		return l
	}
	locs := []*profile.Location{
		loc(kernel, 0xffffffff81001000, "do_syscall_64", 0),
		loc(libc, 0x7f0000001000, "write", 0),
		loc(jit, 0x7e0000000100, "jit_loop_body", 12),
		loc(jit, 0x7e0000000400, "jit_main", 3),
		loc(lli, 0x401000, "llvm::orc::runAsMain", 0),
		loc(lli, 0x400100, "main", 0),
	}
	stacks := [][]*profile.Location{
		{locs[2], locs[3], locs[4], locs[5]},
		{locs[0], locs[1], locs[2], locs[3], locs[4], locs[5]},
		{locs[3], locs[4], locs[5]},
		{locs[1], locs[4], locs[5]},
	}
	pids := []int64{101, 202, 303, 0}
	for i := range n {
		pid := pids[i%len(pids)]
		count := int64(1 + i%3)
		s := &profile.Sample{
			Location: stacks[(i/len(pids))%len(stacks)],
			Value:    []int64{count, count * period},
			Label:    map[string][]string{"event": {"cpu-clock"}, "comm": {fmt.Sprintf("worker-%d", i%2)}},
			NumLabel: map[string][]int64{"tid": {pid + int64(i%2)}},
		}
		if pid != 0 {
			s.NumLabel["pid"] = []int64{pid}
		}
		p.Sample = append(p.Sample, s)
	}
	return Profile{
		Pprof:    p,
		HostName: "host-a",
		Processes: []Process{
			{Pid: 101, ExecutablePath: "/usr/bin/lli-14", ExecutableName: "lli-14", CommandLine: "lli-14 prog.bc", ServiceName: "prog"},
			{Pid: 202, ExecutablePath: "/usr/bin/lli-14", ExecutableName: "lli-14", ContainerID: "c0ffee", Cgroup: "/system.slice/docker-c0ffee.scope"},
			// 303 is unknown: process.pid only.
		},
	}
}

// summary is what must survive the trip: per resource (its attributes as text), per sample
// type, the value total of each leaf function and of each whole stack of names.
type summary map[string]map[string]int64

func (s summary) add(resource, key string, v int64) {
	if s[resource] == nil {
		s[resource] = map[string]int64{}
	}
	s[resource][key] += v
}

// pprofSummary is the summary of p as convert should send it.
func pprofSummary(p Profile) summary {
	s := summary{}
	procs := map[int64]Process{}
	for _, pr := range p.Processes {
		procs[int64(pr.Pid)] = pr
	}
	for _, smp := range p.Pprof.Sample {
		res := []string{"host.name=" + p.HostName}
		if pid, ok := samplePid(smp); ok {
			res = append(res, fmt.Sprintf("process.pid=%d", pid))
			if pr, ok := procs[pid]; ok {
				for k, v := range map[string]string{
					"process.executable.path": pr.ExecutablePath, "process.executable.name": pr.ExecutableName,
					"process.command_line": pr.CommandLine, "container.id": pr.ContainerID,
					"process.linux.cgroup": pr.Cgroup,
				} {
					if v != "" {
						res = append(res, k+"="+v)
					}
				}
				svc := pr.ServiceName
				if svc == "" {
					svc = pr.ExecutableName
				}
				res = append(res, "service.name="+svc)
			}
		}
		sort.Strings(res)
		r := strings.Join(res, " ")
		var names []string
		for _, l := range smp.Location {
			for _, ln := range l.Line {
				names = append(names, ln.Function.Name+"@"+l.Mapping.File+"#"+l.Mapping.BuildID)
			}
		}
		var labels []string
		for k, vs := range smp.Label {
			for _, v := range vs {
				labels = append(labels, labelKey(k)+"="+v)
			}
		}
		for k, vs := range smp.NumLabel {
			if k == "pid" {
				continue
			}
			for _, v := range vs {
				labels = append(labels, fmt.Sprintf("%s=%d", labelKey(k), v))
			}
		}
		sort.Strings(labels)
		for t, st := range p.Pprof.SampleType {
			vt := st.Type + "/" + st.Unit
			s.add(r, vt+" leaf "+names[0], smp.Value[t])
			s.add(r, vt+" stack "+strings.Join(names, ";"), smp.Value[t])
			s.add(r, vt+" labels "+strings.Join(labels, ","), smp.Value[t])
		}
	}
	return s
}

// otlpSummary is the summary of what a Collector received, checking the profiles' headers
// against want on the way.
func otlpSummary(t testing.TB, reqs []pprofile.Profiles, want *profile.Profile) summary {
	t.Helper()
	s := summary{}
	for _, pd := range reqs {
		d := pd.Dictionary()
		str := func(i int32) string { return d.StringTable().At(int(i)) }
		for _, rp := range pd.ResourceProfiles().All() {
			var res []string
			rp.Resource().Attributes().Range(func(k string, v pcommon.Value) bool {
				res = append(res, k+"="+v.AsString())
				return true
			})
			sort.Strings(res)
			r := strings.Join(res, " ")
			for _, sp := range rp.ScopeProfiles().All() {
				for _, prof := range sp.Profiles().All() {
					vt := str(prof.SampleType().TypeStrindex()) + "/" + str(prof.SampleType().UnitStrindex())
					if pt := str(prof.PeriodType().TypeStrindex()) + "/" + str(prof.PeriodType().UnitStrindex()); pt != want.PeriodType.Type+"/"+want.PeriodType.Unit {
						t.Errorf("period type %s, want %s/%s", pt, want.PeriodType.Type, want.PeriodType.Unit)
					}
					if prof.Period() != want.Period || int64(prof.Time()) != want.TimeNanos || int64(prof.DurationNano()) != want.DurationNanos {
						t.Errorf("period %d time %d duration %d, want %d %d %d", prof.Period(), prof.Time(), prof.DurationNano(), want.Period, want.TimeNanos, want.DurationNanos)
					}
					for _, smp := range prof.Samples().All() {
						stack := d.StackTable().At(int(smp.StackIndex()))
						var names []string
						for _, li := range stack.LocationIndices().All() {
							loc := d.LocationTable().At(int(li))
							m := d.MappingTable().At(int(loc.MappingIndex()))
							buildID := ""
							for _, ai := range m.AttributeIndices().All() {
								a := d.AttributeTable().At(int(ai))
								if str(a.KeyStrindex()) == "process.executable.build_id.gnu" {
									buildID = a.Value().Str()
								}
							}
							for _, ln := range loc.Lines().All() {
								f := d.FunctionTable().At(int(ln.FunctionIndex()))
								names = append(names, str(f.NameStrindex())+"@"+str(m.FilenameStrindex())+"#"+buildID)
							}
						}
						var labels []string
						for _, ai := range smp.AttributeIndices().All() {
							a := d.AttributeTable().At(int(ai))
							labels = append(labels, str(a.KeyStrindex())+"="+a.Value().AsString())
						}
						sort.Strings(labels)
						var v int64
						for _, x := range smp.Values().All() {
							v += x
						}
						s.add(r, vt+" leaf "+names[0], v)
						s.add(r, vt+" stack "+strings.Join(names, ";"), v)
						s.add(r, vt+" labels "+strings.Join(labels, ","), v)
					}
				}
			}
		}
	}
	return s
}

func compareSummaries(t testing.TB, got, want summary) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("empty expected summary")
	}
	for r, w := range want {
		g := got[r]
		if g == nil {
			t.Errorf("no resource %q; got resources %v", r, keys(got))
			continue
		}
		for k, v := range w {
			if g[k] != v {
				t.Errorf("resource %q: %s: got %d, want %d", r, k, g[k], v)
			}
		}
		for k, v := range g {
			if _, ok := w[k]; !ok {
				t.Errorf("resource %q: unexpected %s = %d", r, k, v)
			}
		}
	}
	for r := range got {
		if want[r] == nil {
			t.Errorf("unexpected resource %q", r)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// logs is a logger whose text tests read.
func logs() (*slog.Logger, *testenv.SyncBuffer) {
	b := &testenv.SyncBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// waitStats waits until cond holds of e's stats: a bound on a wait, not a timed test.
func waitStats(t testing.TB, e *Exporter, what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		s := e.Stats()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func closeWithin(t testing.TB, e *Exporter, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return e.Close(ctx)
}

// deadAddr is a loopback address nothing listens at: a port that was free a moment ago.
func deadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
