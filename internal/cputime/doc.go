// Package cputime reads the CPU time the process has used, which the bench
// tool and the benchmarks divide by the work done (CPU per request, per
// event), and the CPU time of the calling thread, which a backtest's CPU
// budget bounds.
package cputime
