// Package preflight answers "is it safe to switch this namespace to
// enforce?" (docs/design.md, "Preflight"; `egressd preflight`). Under
// enforce with the egressd-workloads NetworkPolicy, a pod reaches nothing
// but egressd, and a request no rule allows is denied. Preflight lists
// what that would break, from what the caller hands it:
//
//   - pods (Checker.Pods): each pod the NetworkPolicy would confine that
//     has no proxy variables in some container, or whose DNS is not
//     egressd's resolver (it would lose every name, in-cluster ones too),
//     with whether injection marked it;
//   - records (Checker.Add, auditlog's merged records): would-deny
//     requests in the window per workload and host, and unknown clients
//     (denied in every mode already: listed, not counted against enforce);
//   - policies (Checker.Policies): the ones in audit mode, which stay in
//     audit under an enforcing instance.
//
// Result.Safe is true only when enforcing would deny nothing that was
// seen: no confined pod without a way through egressd and no would-deny
// record; no record at all in the window is not safe (nothing was seen).
//
// It is pure like netpol: data in, a Result out; no I/O but the writer it
// is given, no client-go (cmd/egressd lists the API through kube, reads
// records through auditlog, and passes the egressd-workloads selector). Of
// this module it imports auditlog (and through it record), policy,
// identity (a pod's workload, as records name it) and inject (the
// injection mark).
// internal/archtest holds that line.
package preflight
