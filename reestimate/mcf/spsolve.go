package mcf

import "sync"

// spWork is one solve through the series–parallel reduction: the reducer, the expander and
// the SSP on the kernel, with every array they use.
type spWork struct {
	red reducer
	exp expander
	ssp kernelSSP
}

// spPool keeps spWork's arrays from one solve to the next: reestimate.Repair solves one
// network per function, and a fresh arena each time (its allocation and page faults) costs
// as much as the reduction itself.
var spPool = sync.Pool{New: func() any { return new(spWork) }}

// spReduce reduces a valid network, or returns nil when the network is beyond the
// reduction's limits (B above MaxArcCapacity). The caller releases what it returns.
func spReduce(net *Network) *spWork {
	return spReduceBudget(net, spSegmentsPerArc*len(net.Arcs))
}

// spReduceBudget is spReduce with budget segments beyond which reductions stay small.
func spReduceBudget(net *Network, budget int) *spWork {
	bound := net.flowBound()
	if bound > MaxArcCapacity {
		return nil
	}
	w := spPool.Get().(*spWork)
	w.red.reduce(net, bound, budget)
	return w
}

// expander hands the reduction over to w's expander and returns it.
func (w *spWork) expander() *expander {
	w.exp.init(&w.red.spRecord)
	return &w.exp
}

// release returns w's arrays to the pool; w must not be used after. The network's arcs and
// the flow handed out stay the caller's.
func (w *spWork) release() {
	w.red.arcs, w.red.fixed = nil, nil
	w.exp.spRecord = spRecord{}
	spPool.Put(w)
}

// solveSSPReduced solves a valid network: the SSP on what the reduction leaves, started
// from every kernel arc at its own least-cost flow.
func solveSSPReduced(net *Network) ([]int64, error) {
	return solveSSPOn(net, spReduce(net))
}

// solveSSPOn solves net with the SSP on the kernel w's reduction leaves (on net presolved
// when w is nil), and releases w.
func solveSSPOn(net *Network, w *spWork) ([]int64, error) {
	if w == nil {
		var sc presolveScratch
		return solvePresolved(net, solveSSP, &sc)
	}
	defer w.release()
	ex := w.expander()
	k := &w.ssp
	if w.red.kernelResidual(k) {
		res, s := &k.res, &k.state
		s.init(res)
		for i := range k.ids {
			fw := res.fwd[i]
			x := res.pl[i].x
			s.excess[res.slot[fw].head] += x
			s.excess[res.tail(fw)] -= x
		}
		if err := s.run(); err != nil {
			return nil, err
		}
		for i, id := range k.ids {
			ex.flow[id] = res.pl[i].x
		}
	}
	return ex.expand(), nil
}

// solveSeriesParallel solves a valid network by reducing it and solving the kernel, as an
// ordinary network of one arc per segment, with solve (tests use it to put the simplex
// under the reduction); the default path is solveSSPReduced.
func solveSeriesParallel(net *Network, solve func(*Network) ([]int64, error)) ([]int64, error) {
	w := spReduce(net)
	if w == nil {
		var sc presolveScratch
		return solvePresolved(net, solve, &sc)
	}
	defer w.release()
	k, arcEdge := w.red.kernel()
	var kflow []int64
	if k.Nodes > 0 {
		f, err := solve(k)
		if err != nil {
			return nil, err
		}
		kflow = f
	}
	ex := w.expander()
	ex.addKernelFlows(kflow, arcEdge)
	return ex.expand(), nil
}
