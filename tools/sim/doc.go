// Package sim simulates the profiles that reestimate repairs, so its accuracy can be
// measured honestly against exact counts.
//
// Generate builds a random structured CFG (sequences, if-then, diamonds, switches, loops
// with nesting, early returns, rarely or never taken regions, unreachable code) with branch
// probabilities and per-instruction costs. Execute walks it to get exact block and edge
// counts. Sample turns the exact counts into what a sampling profiler sees: Poisson samples
// per executed instruction in proportion to its cost, with skid moving a sample to the
// instruction executed next. Weights averages each block's samples over its instructions
// (reestimate.BlockAverages: the simulator does not pool), and Evaluate compares raw and
// repaired counts by overlap (tools/accuracy/overlap).
//
//	rng := rand.New(rand.NewPCG(1, 2))
//	f := sim.Generate(rng, sim.GenOptions{Blocks: 50})
//	truth := f.Execute(rng, 100)
//	samples := f.Sample(rng, truth, sim.SampleOptions{Period: 50, Skid: 0.3})
//	acc, err := sim.Evaluate(f, truth, sim.Weights(f.CFG, samples), reestimate.Options{})
//
// Everything is deterministic for a given *rand.Rand; nothing here is safe to share across
// goroutines except finished Functions, which are read-only.
package sim
