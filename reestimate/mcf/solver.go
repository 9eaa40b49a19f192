package mcf

// Solver finds a minimum-cost circulation on a Network.
//
// Solve validates net, then returns one flow per arc (index as in net.Arcs) forming a
// circulation of minimum total cost. It does not modify net. The implementations in this
// package are safe for concurrent use (the fast one takes its working arrays from a pool).
type Solver interface {
	Solve(net *Network) ([]int64, error)
	// Name identifies the algorithm in logs and benchmarks.
	Name() string
}

// SimplexSolver returns the primal network simplex solver, run on the presolved network. See
// solver_simplex.go.
func SimplexSolver() Solver { return simplex{} }

// SSPSolver returns the default solver: exact successive shortest paths with potentials,
// global Dijkstra rounds and depth-first sweeps over zero-reduced-cost arcs, run on what the
// series–parallel reduction (spreduce.go) leaves of the network. It is the faster of the two
// exact solvers on the networks reestimate builds, the more so the larger they are: the
// network simplex's tree grows as deep as the network is long. See solver_ssp.go.
func SSPSolver() Solver { return ssp{} }

// ReferenceSolver returns the paper's method: Edmonds–Karp maximum flow from Source to
// Sink, then Klein's cancelling of negative cycles in the residual network. It is slow
// (pseudo-polynomial) and meant for tests that check SSPSolver.
func ReferenceSolver() Solver { return cycleCancelling{} }
