package mcf

// What the external tests (repairnet_test.go, on networks reestimate.Repair builds) look at
// inside the package.

var (
	ReferenceCost = referenceCost
	OptimumError  = optimumError
	KernelOf      = kernelOf
	SolveBothWays = solveBothWays
	SolveReduced  = solveReduced
	// SolveSSPUnreduced is the SSP on the whole network, without the series–parallel
	// reduction in front.
	SolveSSPUnreduced = solveSSP
)

// SmallSegments is how many segments an edge made beyond the budget may have.
const SmallSegments = spSmallSegments

// Presolve runs one presolve pass on net and returns the reduced network and the number of
// arcs folded away, or nil and 0 when nothing folds.
func Presolve(net *Network) (*Network, int) {
	r := presolve(net, &presolveScratch{})
	if r == nil {
		return nil, 0
	}
	return &r.net, len(r.folded)
}

// ReductionSegments returns how many segments the series–parallel reduction of net leaves
// in its arena.
func ReductionSegments(net *Network) int {
	w := spReduce(net)
	defer w.release()
	return len(w.red.seg)
}

// ReduceOverBudget reduces net with the segment budget spent from the start and returns the
// kernel, the most segments of any edge the reduction made (runs of parallel arcs aside) and
// the SSP's optimum on that kernel.
func ReduceOverBudget(net *Network) (kernel *Network, largest int, flow []int64, err error) {
	w := spReduceBudget(net, 0)
	kernel, _ = w.red.kernel()
	for _, e := range w.red.edges {
		if e.kind != spArc {
			largest = max(largest, int(e.n))
		}
	}
	flow, err = solveSSPOn(net, w)
	return kernel, largest, flow, err
}
